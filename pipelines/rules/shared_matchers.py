"""Matchers shared between engines: a tenant's engine reuses the keyword and regex matchers of
the engine its stack builds on for every rule it keeps unchanged.

A tenant layer usually keeps almost every rule of the default set: it disables a few, overrides
an action, adds a rule or two. Building the whole keyword automaton and every regex set again
for each distinct stack costs start-up time and memory per stack, and, worse, spreads the
messages of many tenants over as many automata, which no CPU cache holds at once (measured with
``python -m bench.rules --tenants 1000 --stacks 10``: 1.36 times one tenant's cost with ten
separate engines). Here the engine of a stack matches the rules it shares with a *base* engine
(same id, same keywords; same id, patterns, match mode and exempt spans) with the base's
matchers, keeps only the ids that are its own enabled rules, and builds small matchers for the
rest. A rule's matches do not depend on the other rules of a matcher, so the hits are the same as
a matcher of its own would give (checked by the unit tests on the default examples).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

from pipelines.canonical import CanonicalText, TracedText
from pipelines.rule_hits import HitSpan
from pipelines.rules.config import KeywordRule, RegexRule
from pipelines.rules.keywords import KeywordMatcher
from pipelines.rules.patterns import PatternMatcher

__all__ = ["LayeredKeywords", "LayeredPatterns"]


def _keyword_key(rule: KeywordRule) -> tuple[str, tuple[str, ...]]:
    return rule.meta.id, rule.keywords


def _pattern_key(rule: RegexRule) -> tuple[object, ...]:
    return rule.meta.id, rule.patterns, rule.match, rule.exempt


class LayeredKeywords:
    """``KeywordMatcher``'s interface over a base matcher's shared rules and one of its own."""

    __slots__ = ("_base", "_own", "_shared")

    def __init__(
        self,
        rules: Sequence[KeywordRule],
        base: KeywordMatcher,
        base_rules: Sequence[KeywordRule],
    ) -> None:
        keys = {_keyword_key(rule) for rule in base_rules}
        self._shared = frozenset(r.meta.id for r in rules if _keyword_key(r) in keys)
        self._base = base
        self._own = KeywordMatcher([r for r in rules if r.meta.id not in self._shared])

    def match(self, canonical: CanonicalText) -> set[str]:
        found = self._own.match(canonical)
        if self._shared:
            found |= self._base.match(canonical) & self._shared
        return found

    def locate(self, rule_ids: Collection[str], traced: TracedText) -> dict[str, list[HitSpan]]:
        wanted = set(rule_ids)
        located = self._own.locate(wanted - self._shared, traced)
        if wanted & self._shared:
            located.update(self._base.locate(wanted & self._shared, traced))
        return located


class LayeredPatterns:
    """``PatternMatcher``'s interface over a base matcher's shared rules and one of its own."""

    __slots__ = ("_base", "_own", "_shared")

    def __init__(
        self,
        rules: Sequence[RegexRule],
        base: PatternMatcher,
        base_rules: Sequence[RegexRule],
    ) -> None:
        keys = {_pattern_key(rule) for rule in base_rules}
        self._shared = frozenset(r.meta.id for r in rules if _pattern_key(r) in keys)
        self._base = base
        self._own = PatternMatcher([r for r in rules if r.meta.id not in self._shared])

    def match(self, text: str) -> set[str]:
        found = self._own.match(text)
        if self._shared:
            found |= self._base.match(text) & self._shared
        return found

    def has_rule(self, rule_id: str) -> bool:
        return rule_id in self._shared or self._own.has_rule(rule_id)

    def locate(self, rule_id: str, text: str) -> Iterator[tuple[int, int]]:
        return (self._base if rule_id in self._shared else self._own).locate(rule_id, text)
