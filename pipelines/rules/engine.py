"""The rule engine: canonicalise once, then keywords, regexes and profile rules.

Regexes search the canonical text with defanged links restored and each of its leetspeak
readings (``k1ll y0u`` reads ``kill you``); keywords have their own readings (see
``pipelines.rules.keywords``).

A rule's hit that lies only in an exempt span (``exempt``, keyword rules: an ordinary sense such
as "a chink in the armour") or only in a quoted mention ("someone wrote 'i'll stab you' under my
post", ``pipelines.rules.mentions``) does not count: the text is matched again with those spans
blanked. Rules of the urgent categories (``pipelines.severe_harm.URGENT_CATEGORIES``: self-harm,
minors) keep their hits in mentions too, since someone may be in danger. A message that reports
abuse its writer received (``pipelines.rules.reports``) also loses the hits of rules marked
``yields_to_reports``; the model decides it.

The caller that also needs the canonical text (the worker sends ``CanonicalText.text`` to the
models) computes it once with ``pipelines.canonical.canonicalize`` and passes it to
``RuleEngine.evaluate``; otherwise the engine computes it itself.
"""

from __future__ import annotations

from pipelines.canonical import CanonicalText, canonicalize
from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome
from pipelines.rules.config import KeywordRule, ProfileRule, RegexRule, RuleSet, compile_re2
from pipelines.rules.keywords import KeywordMatcher
from pipelines.rules.mentions import blank_spans, mentioned_spans
from pipelines.rules.patterns import PatternMatcher
from pipelines.rules.profile import ProfileMatcher
from pipelines.rules.reports import is_report
from pipelines.severe_harm import URGENT_CATEGORIES

__all__ = ["RuleEngine"]

_WARM_UP = "W\u0430rm f\u00fc u c k sh1t f*ck scam[.]com \u50bb \u903c \u8aaa"
"""Exercises every canonical stage once, so its lazily built tables (confusables, OpenCC,
pinyin codes) are built with the engine, not on the first message that needs them."""
_ACTION_RANK = {RuleAction.BLOCK: 0, RuleAction.ESCALATE: 1, RuleAction.FLAG: 2}


class RuleEngine:
    """Evaluates the enabled rules of a ``RuleSet``; build once, share freely (immutable)."""

    __slots__ = (
        "_hits",
        "_keyword_exempt",
        "_keywords",
        "_patterns",
        "_profile",
        "_urgent",
        "_yielding",
        "ruleset",
    )

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        enabled = ruleset.enabled
        self._keywords = KeywordMatcher([r for r in enabled if isinstance(r, KeywordRule)])
        self._patterns = PatternMatcher([r for r in enabled if isinstance(r, RegexRule)])
        self._profile = ProfileMatcher([r for r in enabled if isinstance(r, ProfileRule)])
        self._yielding = frozenset(rule.meta.id for rule in enabled if rule.meta.yields_to_reports)
        self._urgent = frozenset(
            rule.meta.id for rule in enabled if rule.meta.category in URGENT_CATEGORIES
        )
        self._keyword_exempt = {
            rule.meta.id: compile_re2("|".join(f"(?:{span})" for span in rule.exempt))
            for rule in enabled
            if isinstance(rule, KeywordRule) and rule.exempt
        }
        canonicalize(_WARM_UP)
        self._hits = {
            rule.meta.id: RuleHit(
                rule_id=rule.meta.id,
                category=rule.meta.category,
                severity=rule.meta.severity,
                action=rule.meta.action,
                yields_to_model=rule.meta.yields_to_model,
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
        ids = self._match(message, canonical)
        if ids - self._urgent:
            spans = mentioned_spans(canonical.text)
            if spans:
                unquoted = canonicalize(blank_spans(canonical.text, spans))
                ids = (ids & self._match(message, unquoted)) | (ids & self._urgent)
        if ids & self._yielding and is_report(canonical.text):
            ids -= self._yielding
        if not ids:
            return _NO_HITS
        hits = sorted(
            (self._hits[rule_id] for rule_id in ids),
            key=lambda hit: (-hit.severity, _ACTION_RANK[hit.action], hit.rule_id),
        )
        return RuleOutcome(hits=tuple(hits))

    def _match(self, message: ChatMessage, canonical: CanonicalText) -> set[str]:
        """Every rule whose keywords, patterns or profile check match, exempt spans aside."""
        ids = self._keywords.match(canonical)
        ids |= self._patterns.match(canonical.links)
        for reading in canonical.leet:
            ids |= self._patterns.match(reading)
        ids |= self._profile.match(message, canonical.links)
        for rule_id in ids & self._keyword_exempt.keys():
            blanked = self._keyword_exempt[rule_id].sub(" ", canonical.text)
            if blanked != canonical.text and rule_id not in self._keywords.match(
                canonicalize(blanked)
            ):
                ids.discard(rule_id)
        return ids


_NO_HITS = RuleOutcome()
