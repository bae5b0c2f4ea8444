"""Perspective's attributes as modstream scores them: the mapping of ``attributes.toml``.

The table is data (``attributes.toml``, beside this module, with the reasoning): per attribute,
the model probabilities summed for its model score (and the ones summed instead when the served
model lacks an output), the rule categories and rule ids that count, from which severity, and
the probability a rule hit stands for by its severity. An attribute's score is the larger of its
model score and its best rule hit's; see :meth:`AttributeMapping.score`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from online.errors import OnlineError
from pipelines.rule_hits import HitSpan, RuleHit, Severity
from pipelines.scores import (
    HARM_LABELS,
    INTENT_LABELS,
    SENTIMENT_LABELS,
    TOXICITY_LABELS,
    ModelScores,
)

__all__ = [
    "ATTRIBUTES_FILE",
    "AttributeMapping",
    "AttributeRule",
    "AttributeScore",
    "MappingError",
    "Unscorable",
    "load_mapping",
    "parse_mapping",
]

ATTRIBUTES_FILE = Path(__file__).with_name("attributes.toml")
_LABELS: dict[str, tuple[str, ...]] = {
    "sentiment": SENTIMENT_LABELS,
    "intent": INTENT_LABELS,
    "toxicity": TOXICITY_LABELS,
    "harms": HARM_LABELS,
}


class MappingError(OnlineError):
    """``attributes.toml`` is not a valid mapping (the message names the entry)."""


class Unscorable(OnlineError):
    """The served model has no output the attribute is scored from, and no rule hit scores it."""

    def __init__(self, attribute: str) -> None:
        super().__init__(f"{attribute} cannot be scored by the served model")
        self.attribute = attribute


@dataclass(frozen=True, slots=True)
class AttributeRule:
    """How one attribute is scored (one ``[attributes.NAME]`` table)."""

    name: str
    model: tuple[str, ...]
    """``task.label`` probabilities summed for the model's score."""
    fallback: tuple[str, ...]
    """Summed instead when the model lacks an output of ``model`` (empty: nothing to fall on)."""
    rule_categories: frozenset[str]
    rule_ids: frozenset[str]
    min_severity: Severity
    span_outputs: frozenset[str]
    """Attribution outputs (``pipelines.attribution``) whose spans mark this attribute."""
    languages: frozenset[str]

    def counts(self, hit: RuleHit) -> bool:
        """Whether ``hit`` is evidence of this attribute."""
        named = hit.category in self.rule_categories or hit.rule_id in self.rule_ids
        return named and hit.severity >= self.min_severity


@dataclass(frozen=True, slots=True)
class AttributeScore:
    """One attribute's summary probability and the spans that carry it."""

    value: float
    spans: tuple[tuple[HitSpan, float], ...]
    """``((start, end), probability)`` located by a rule hit or the model's attribution, in
    code points of the original text; empty when nothing was located."""


def _model_value(scores: ModelScores | None, terms: Sequence[str]) -> float | None:
    """The sum of ``terms`` (``None`` when the model gave none of a term's output)."""
    if scores is None or not terms:
        return None
    tasks = scores.as_dict()
    total = 0.0
    for term in terms:
        task, _, label = term.partition(".")
        row = tasks.get(task)
        if row is None:
            return None
        total += row[label]
    return min(total, 1.0)


@dataclass(frozen=True, slots=True)
class AttributeMapping:
    """The whole table: every attribute modstream scores, and the rule hits' probabilities."""

    attributes: Mapping[str, AttributeRule]
    rule_scores: Mapping[Severity, float]

    def model_score(self, name: str, scores: ModelScores | None) -> float | None:
        """The model's probability of attribute ``name`` (``None``: the model gave no score it
        is made from)."""
        rule = self.attributes[name]
        value = _model_value(scores, rule.model)
        if value is None:
            value = _model_value(scores, rule.fallback)
        return value

    def score(
        self,
        name: str,
        scores: ModelScores | None,
        hits: Sequence[RuleHit],
        attribution: Sequence[tuple[str, HitSpan]] = (),
    ) -> AttributeScore:
        """Attribute ``name`` from the model's ``scores``, the rule ``hits`` and the model's
        ``attribution`` (``(output, span)`` pairs); ``Unscorable`` when neither the model nor a
        rule hit says anything about it."""
        rule = self.attributes[name]
        model = self.model_score(name, scores)
        spans: list[tuple[HitSpan, float]] = []
        best_rule: float | None = None
        for hit in hits:
            if not rule.counts(hit):
                continue
            probability = self.rule_scores[hit.severity]
            best_rule = probability if best_rule is None else max(best_rule, probability)
            spans.extend((span, probability) for span in hit.spans)
        if model is None and best_rule is None:
            raise Unscorable(name)
        value = max(v for v in (model, best_rule) if v is not None)
        spans.extend((span, value) for output, span in attribution if output in rule.span_outputs)
        spans.sort(key=lambda item: item[0])
        return AttributeScore(value, tuple(spans))


def _strings(table: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MappingError(f"{where}.{key}: expected a list of strings")
    return tuple(value)


def _terms(table: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
    terms = _strings(table, key, where)
    for term in terms:
        task, _, label = term.partition(".")
        if label not in _LABELS.get(task, ()):
            raise MappingError(f"{where}.{key}: {term!r} is not a model probability")
    return terms


def _severity(value: object, where: str) -> Severity:
    try:
        return Severity[str(value).upper()]
    except KeyError:
        raise MappingError(f"{where}: unknown severity {value!r}") from None


def _attribute(name: str, table: object) -> AttributeRule:
    where = f"attributes.{name}"
    if not isinstance(table, dict):
        raise MappingError(f"{where}: expected a table")
    return AttributeRule(
        name=name,
        model=_terms(table, "model", where),
        fallback=_terms(table, "fallback", where),
        rule_categories=frozenset(_strings(table, "rule_categories", where)),
        rule_ids=frozenset(_strings(table, "rule_ids", where)),
        min_severity=_severity(table.get("min_severity"), f"{where}.min_severity"),
        span_outputs=frozenset(_strings(table, "span_outputs", where)),
        languages=frozenset(_strings(table, "languages", where)),
    )


def parse_mapping(document: Mapping[str, object]) -> AttributeMapping:
    """The mapping of a parsed ``attributes.toml`` (``MappingError`` naming what is wrong)."""
    raw_scores = document.get("rule_scores")
    attributes = document.get("attributes")
    if not isinstance(raw_scores, dict) or not isinstance(attributes, dict) or not attributes:
        raise MappingError("expected [rule_scores] and at least one [attributes.NAME]")
    rule_scores: dict[Severity, float] = {}
    for severity in Severity:
        value = raw_scores.get(severity.name.lower())
        if not isinstance(value, float | int) or not 0.0 <= value <= 1.0:
            raise MappingError(f"rule_scores.{severity.name.lower()}: expected a probability")
        rule_scores[severity] = float(value)
    return AttributeMapping(
        attributes={name: _attribute(name, table) for name, table in attributes.items()},
        rule_scores=rule_scores,
    )


def load_mapping(path: Path = ATTRIBUTES_FILE) -> AttributeMapping:
    """The mapping in ``path`` (the shipped table by default)."""
    with path.open("rb") as handle:
        return parse_mapping(tomllib.load(handle))
