"""The rule engine: canonicalise once, then keywords, regexes and profile rules.

Regexes search the canonical text with defanged links restored and each of its leetspeak
readings (``k1ll y0u`` reads ``kill you``); keywords have their own readings (see
``pipelines.rules.keywords``).

A message that reports abuse its writer received (``pipelines.rules.reports``) loses the hits of
rules marked ``yields_to_reports``; the model decides it.

The caller that also needs the canonical text (the worker sends ``CanonicalText.text`` to the
models) computes it once with ``pipelines.canonical.canonicalize`` and passes it to
``RuleEngine.evaluate``; otherwise the engine computes it itself.
"""

from __future__ import annotations

from pipelines.canonical import CanonicalText, canonicalize
from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome
from pipelines.rules.config import KeywordRule, ProfileRule, RegexRule, RuleSet
from pipelines.rules.keywords import KeywordMatcher
from pipelines.rules.patterns import PatternMatcher
from pipelines.rules.profile import ProfileMatcher
from pipelines.rules.reports import is_report

__all__ = ["RuleEngine"]

_WARM_UP = "W\u0430rm f\u00fc u c k sh1t f*ck scam[.]com \u50bb \u903c \u8aaa"
"""Exercises every canonical stage once, so its lazily built tables (confusables, OpenCC,
pinyin codes) are built with the engine, not on the first message that needs them."""
_ACTION_RANK = {RuleAction.BLOCK: 0, RuleAction.ESCALATE: 1, RuleAction.FLAG: 2}


class RuleEngine:
    """Evaluates the enabled rules of a ``RuleSet``; build once, share freely (immutable)."""

    __slots__ = ("_hits", "_keywords", "_patterns", "_profile", "_yielding", "ruleset")

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        enabled = ruleset.enabled
        self._keywords = KeywordMatcher([r for r in enabled if isinstance(r, KeywordRule)])
        self._patterns = PatternMatcher([r for r in enabled if isinstance(r, RegexRule)])
        self._profile = ProfileMatcher([r for r in enabled if isinstance(r, ProfileRule)])
        self._yielding = frozenset(rule.meta.id for rule in enabled if rule.meta.yields_to_reports)
        canonicalize(_WARM_UP)
        self._hits = {
            rule.meta.id: RuleHit(
                rule_id=rule.meta.id,
                category=rule.meta.category,
                severity=rule.meta.severity,
                action=rule.meta.action,
            )
            for rule in enabled
        }

    def evaluate(self, message: ChatMessage, canonical: CanonicalText | None = None) -> RuleOutcome:
        """All matching rules, deduplicated by id, most severe first (then block, escalate,
        flag, then by id).

        ``canonical`` is ``canonicalize(message.text)`` when the caller has it already.
        """
        if canonical is None:
            canonical = canonicalize(message.text)
        ids = self._keywords.match(canonical)
        ids |= self._patterns.match(canonical.links)
        for reading in canonical.leet:
            ids |= self._patterns.match(reading)
        ids |= self._profile.match(message, canonical.links)
        if ids & self._yielding and is_report(canonical.text):
            ids -= self._yielding
        if not ids:
            return _NO_HITS
        hits = sorted(
            (self._hits[rule_id] for rule_id in ids),
            key=lambda hit: (-hit.severity, _ACTION_RANK[hit.action], hit.rule_id),
        )
        return RuleOutcome(hits=tuple(hits))


_NO_HITS = RuleOutcome()
