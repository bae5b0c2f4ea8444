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
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from pipelines.data_files import DataFile, DataFileError, Provenance, read_data_file, strings, table

__all__ = [
    "RuleExampleSet",
    "RuleExamples",
    "default_rule_examples",
    "parse_example_tables",
    "parse_rule_examples",
]

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
    """Rules' examples, by rule id in file order, and the everyday lines: the shipped file's
    (with its provenance) or a layer's own (``[[examples]]`` and ``[everyday]`` in a layer file,
    ``pipelines.rules.layers``)."""

    rules: Mapping[str, RuleExamples]
    no_hits: tuple[str, ...] = ()
    """Ordinary chat that no rule may hit."""
    no_severe_hits: tuple[str, ...] = ()
    """Ordinary talk (idioms, cooking, games, medicine, news) no severe-harm rule may hit."""
    provenance: Provenance | None = None
    """Where the lines come from: a data file's; ``None`` for a layer's."""


def parse_rule_examples(data: DataFile) -> RuleExampleSet:
    """A read examples file, checked: every rule has an id, examples and near misses."""
    examples = parse_example_tables(
        data.name, data.body.get("rules"), table(data.name, data.body, "everyday"), required=True
    )
    return replace(examples, provenance=data.provenance)


def parse_example_tables(
    name: str, raw_rules: object, everyday: Mapping[str, Any] | None, *, required: bool
) -> RuleExampleSet:
    """``[[rules]]`` (or a layer's ``[[examples]]``) tables of ``id``, ``examples`` and
    ``near_misses``, and the ``[everyday]`` lines; ``required``: at least one rule's and both
    everyday lists (the shipped file), otherwise all may be absent (a layer)."""
    if everyday is not None and set(everyday) - _EVERYDAY_KEYS:
        unknown = sorted(set(everyday) - _EVERYDAY_KEYS)
        raise DataFileError(name, f"[everyday] has unknown keys {unknown}")
    if raw_rules is None and not required:
        raw_rules = []
    if not isinstance(raw_rules, list) or (required and not raw_rules):
        raise DataFileError(name, "needs at least one [[rules]] table")
    rules: dict[str, RuleExamples] = {}
    for position, raw in enumerate(raw_rules):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            raise DataFileError(name, f"rules[{position}] must be a table with an 'id'")
        rule_id = raw["id"]
        if set(raw) - _RULE_KEYS:
            raise DataFileError(
                name, f"rule {rule_id!r}: unknown keys {sorted(set(raw) - _RULE_KEYS)}"
            )
        if rule_id in rules:
            raise DataFileError(name, f"rule {rule_id!r} appears twice")
        rules[rule_id] = RuleExamples(
            rule_id,
            strings(name, raw.get("examples"), f"rule {rule_id!r} examples"),
            strings(name, raw.get("near_misses"), f"rule {rule_id!r} near_misses"),
        )
    lines = everyday or {}
    return RuleExampleSet(
        rules,
        _lines(name, lines, "no_hits", required=required),
        _lines(name, lines, "no_severe_hits", required=required),
    )


def _lines(name: str, everyday: Mapping[str, Any], key: str, *, required: bool) -> tuple[str, ...]:
    if key not in everyday and not required:
        return ()
    return strings(name, everyday.get(key), f"everyday.{key}")


@functools.cache
def default_rule_examples() -> RuleExampleSet:
    """The shipped rules' examples, ``pipelines/rulesets/default_examples.toml``."""
    path = resources.files("pipelines").joinpath("rulesets", "default_examples.toml")
    return parse_rule_examples(read_data_file(path))
