"""The examples and near misses of the shipped rules, ``pipelines/rulesets/default_examples.toml``.

Each rule of ``default.toml`` (profile rules aside: they read metadata, not text) has texts it
must fire on and benign texts that resemble them that it must not; ``[everyday]`` holds
ordinary chat no rule may hit and ordinary talk no severe-harm rule may hit. The file is a data
file with its provenance (:mod:`pipelines.data_files`); the unit tests of the rule set check
every entry against the engine.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from pipelines.data_files import DataFile, DataFileError, Provenance, read_data_file, strings, table

__all__ = ["RuleExampleSet", "RuleExamples", "default_rule_examples", "parse_rule_examples"]

_RULE_KEYS = frozenset({"id", "examples", "near_misses"})
_EVERYDAY_KEYS = frozenset({"no_hits", "no_severe_hits"})


@dataclass(frozen=True, slots=True)
class RuleExamples:
    """What one rule must fire on and the benign look-alikes it must leave alone."""

    rule_id: str
    examples: tuple[str, ...]
    near_misses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RuleExampleSet:
    """Every rule's examples, by rule id in file order, and the everyday lines."""

    provenance: Provenance
    rules: Mapping[str, RuleExamples]
    no_hits: tuple[str, ...]
    """Ordinary chat that no rule may hit."""
    no_severe_hits: tuple[str, ...]
    """Ordinary talk (idioms, cooking, games, medicine, news) no severe-harm rule may hit."""


def parse_rule_examples(data: DataFile) -> RuleExampleSet:
    """A read examples file, checked: every rule has an id, examples and near misses."""
    everyday = table(data.name, data.body, "everyday")
    unknown = set(everyday) - _EVERYDAY_KEYS
    if unknown:
        raise DataFileError(data.name, f"[everyday] has unknown keys {sorted(unknown)}")
    raw_rules = data.body.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise DataFileError(data.name, "needs at least one [[rules]] table")
    rules: dict[str, RuleExamples] = {}
    for position, raw in enumerate(raw_rules):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            raise DataFileError(data.name, f"rules[{position}] must be a table with an 'id'")
        rule_id = raw["id"]
        if set(raw) - _RULE_KEYS:
            raise DataFileError(
                data.name, f"rule {rule_id!r}: unknown keys {sorted(set(raw) - _RULE_KEYS)}"
            )
        if rule_id in rules:
            raise DataFileError(data.name, f"rule {rule_id!r} appears twice")
        rules[rule_id] = RuleExamples(
            rule_id,
            strings(data.name, raw.get("examples"), f"rule {rule_id!r} examples"),
            strings(data.name, raw.get("near_misses"), f"rule {rule_id!r} near_misses"),
        )
    return RuleExampleSet(
        data.provenance,
        rules,
        strings(data.name, everyday.get("no_hits"), "everyday.no_hits"),
        strings(data.name, everyday.get("no_severe_hits"), "everyday.no_severe_hits"),
    )


@functools.cache
def default_rule_examples() -> RuleExampleSet:
    """The shipped rules' examples, ``pipelines/rulesets/default_examples.toml``."""
    path = resources.files("pipelines").joinpath("rulesets", "default_examples.toml")
    return parse_rule_examples(read_data_file(path))
