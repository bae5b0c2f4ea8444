"""A layer's examples checked against the rules it makes: what each rule must fire on, the near
misses it must leave alone, the everyday lines no rule (no severe rule) may hit.

Each layer's examples (``pipelines.rules.layers``) are checked against the stack as it stands at
that layer, so a later layer that disables or changes a rule does not break the examples below
it. ``modstream rules check`` and the unit tests of the shipped layers run this; a profile rule's
examples would need metadata, so profile rules have none.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from pipelines.messages import ChatMessage
from pipelines.rules.engine import RuleEngine
from pipelines.rules.examples import RuleExampleSet
from pipelines.rules.layers import RuleStack

__all__ = ["ExampleFailure", "check_examples", "check_stack", "examples_count"]

_SENT_AT = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ExampleFailure:
    """One example that does not hold: which layer's, about which rule, what went wrong."""

    layer: str
    rule_id: str | None
    problem: str
    text: str

    def __str__(self) -> str:
        about = f" rule {self.rule_id!r}" if self.rule_id is not None else ""
        return f"layer {self.layer}:{about} {self.problem}: {self.text!r}"


def check_examples(
    engine: RuleEngine, layer: str, examples: RuleExampleSet
) -> list[ExampleFailure]:
    """Every example, near miss and everyday line of ``examples`` run through ``engine``."""
    failures: list[ExampleFailure] = []
    for rule in examples.rules.values():
        for text in rule.examples:
            if rule.rule_id not in _hit_ids(engine, text):
                failures.append(ExampleFailure(layer, rule.rule_id, "does not fire on", text))
        for text in rule.near_misses:
            if rule.rule_id in _hit_ids(engine, text):
                failures.append(ExampleFailure(layer, rule.rule_id, "fires on near miss", text))
    for text in examples.no_hits:
        for rule_id in sorted(_hit_ids(engine, text)):
            failures.append(ExampleFailure(layer, rule_id, "hits everyday line", text))
    for text in examples.no_severe_hits:
        for hit in engine.evaluate(_message(text)).hits:
            if engine.severe.is_severe(hit.category):
                failures.append(ExampleFailure(layer, hit.rule_id, "severe hit on", text))
    return failures


def check_stack(
    stack: RuleStack,
    build: Callable[[RuleStack], RuleEngine],
    *,
    below: bool = False,
    skip: Collection[str] = (),
) -> list[ExampleFailure]:
    """The top layer's examples against ``stack``'s rules, and with ``below`` every layer's
    against the stack up to it, but those of the layers named in ``skip``; ``build`` makes (or
    reuses) the engine of each stack."""
    failures: list[ExampleFailure] = []
    current: RuleStack | None = stack
    while current is not None:
        top = current.layers[-1]
        wanted = top.name not in skip
        if wanted and (top.examples.rules or top.examples.no_hits or top.examples.no_severe_hits):
            failures[:0] = check_examples(build(current), top.name, top.examples)
        current = current.below if below else None
    return failures


def examples_count(examples: RuleExampleSet) -> int:
    """How many lines ``examples`` holds: examples, near misses and everyday lines."""
    per_rule = sum(len(r.examples) + len(r.near_misses) for r in examples.rules.values())
    return per_rule + len(examples.no_hits) + len(examples.no_severe_hits)


def _message(text: str) -> ChatMessage:
    return ChatMessage("example", "example", "example", text, _SENT_AT, {})


def _hit_ids(engine: RuleEngine, text: str) -> set[str]:
    return {hit.rule_id for hit in engine.evaluate(_message(text)).hits}
