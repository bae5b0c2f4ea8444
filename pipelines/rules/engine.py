"""The rule engine: canonicalise once, then keywords, regexes and profile rules.

Regexes search the canonical text with defanged links restored and each of its leetspeak
readings (``k1ll y0u`` reads ``kill you``); keywords have their own readings (see
``pipelines.rules.keywords``).

A rule's hit that lies only in an exempt span (``exempt``, keyword rules: an ordinary sense such
as "a chink in the armour") or only in a quoted mention ("someone wrote 'i'll stab you' under my
post", ``pipelines.rules.mentions``) does not count: the text is matched again with those spans
blanked. Rules of the urgent categories (the stack's ``SevereTable``; shipped: self-harm,
minors) keep their hits in mentions too, since someone may be in danger. A message that reports
abuse its writer received (``pipelines.rules.reports``) also loses the hits of rules marked
``yields_to_reports``; the model decides it.

Each hit carries the spans where its rule matched, as offsets into the raw text
(``RuleHit.spans``): only for a message with hits, the text is canonicalised once more with its
offset maps (``pipelines.canonical.trace``) and each hit rule's keywords, patterns or link check
located in the canonical text and its readings, then mapped back; a match inside a span that
did not count (exempt, quoted mention) is left out unless nothing else is left.

The caller that also needs the canonical text (the worker sends ``CanonicalText.text`` to the
models) computes it once with ``pipelines.canonical.canonicalize`` and passes it to
``RuleEngine.evaluate``; otherwise the engine computes it itself.
"""

from __future__ import annotations

from dataclasses import replace

from pipelines.canonical import CanonicalText, OffsetError, TracedText, canonicalize, trace
from pipelines.messages import ChatMessage
from pipelines.rule_hits import HitSpan, RuleAction, RuleHit, RuleOutcome
from pipelines.rules.config import KeywordRule, ProfileRule, RegexRule, RuleSet, compile_re2
from pipelines.rules.keywords import KeywordMatcher
from pipelines.rules.mentions import blank_spans, mentioned_spans
from pipelines.rules.patterns import PatternMatcher
from pipelines.rules.profile import ProfileMatcher
from pipelines.rules.reports import is_report
from pipelines.rules.shared_matchers import LayeredKeywords, LayeredPatterns
from pipelines.severe_harm import SHIPPED, SevereTable

__all__ = ["RuleEngine"]

_WARM_UP = "W\u0430rm f\u00fc u c k sh1t f*ck scam[.]com \u50bb \u903c \u8aaa"
"""Exercises every canonical stage once, so its lazily built tables (confusables, OpenCC,
pinyin codes) are built with the engine, not on the first message that needs them."""
_ACTION_RANK = {RuleAction.BLOCK: 0, RuleAction.ESCALATE: 1, RuleAction.FLAG: 2}
MAX_SPANS = 32
"""Spans kept per hit (the first ones in the text): enough to show, bounded in the row."""


class RuleEngine:
    """Evaluates the enabled rules of a ``RuleSet``; build once, share freely (immutable)."""

    __slots__ = (
        "_hits",
        "_keyword_exempt",
        "_keywords",
        "_no_hits",
        "_patterns",
        "_profile",
        "_spans_wanted",
        "_urgent",
        "_yielding",
        "ruleset",
        "severe",
    )

    def __init__(
        self,
        ruleset: RuleSet,
        *,
        spans: bool = True,
        base: RuleEngine | None = None,
        severe: SevereTable = SHIPPED,
    ) -> None:
        """``spans``: locate each hit (``RuleHit.spans``); off only to measure what it costs
        (``python -m bench.rules --no-spans``). ``base``: an engine whose keyword and regex
        matchers this one reuses for the rules it keeps unchanged (a tenant's stack over the
        default, ``pipelines.rules.shared_matchers``); its hits are the same either way.
        ``severe``: the severe categories of its stack (a layer may add some): their rules keep
        their hits in mentions when urgent, and the outcomes carry the table to the policy."""
        self.ruleset = ruleset
        self.severe = severe
        self._no_hits = RuleOutcome(severe=severe)
        self._spans_wanted = spans
        enabled = ruleset.enabled
        keywords = [r for r in enabled if isinstance(r, KeywordRule)]
        regexes = [r for r in enabled if isinstance(r, RegexRule)]
        self._keywords: KeywordMatcher | LayeredKeywords
        self._patterns: PatternMatcher | LayeredPatterns
        if base is None:
            self._keywords = KeywordMatcher(keywords)
            self._patterns = PatternMatcher(regexes)
        else:
            below = base.ruleset.enabled
            self._keywords = LayeredKeywords(
                keywords, base.keyword_matcher, [r for r in below if isinstance(r, KeywordRule)]
            )
            self._patterns = LayeredPatterns(
                regexes, base.pattern_matcher, [r for r in below if isinstance(r, RegexRule)]
            )
        self._profile = ProfileMatcher([r for r in enabled if isinstance(r, ProfileRule)])
        self._yielding = frozenset(rule.meta.id for rule in enabled if rule.meta.yields_to_reports)
        self._urgent = frozenset(
            rule.meta.id for rule in enabled if rule.meta.category in severe.urgent
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

    @property
    def keyword_matcher(self) -> KeywordMatcher:
        """The keyword matcher an engine over this one may share (its own, not layered)."""
        if isinstance(self._keywords, LayeredKeywords):
            raise ValueError("a layered engine's matchers are not shared further")
        return self._keywords

    @property
    def pattern_matcher(self) -> PatternMatcher:
        """The regex matcher an engine over this one may share (its own, not layered)."""
        if isinstance(self._patterns, LayeredPatterns):
            raise ValueError("a layered engine's matchers are not shared further")
        return self._patterns

    @property
    def is_layered(self) -> bool:
        """Whether this engine reuses another's matchers."""
        return isinstance(self._keywords, LayeredKeywords)

    def evaluate(self, message: ChatMessage, canonical: CanonicalText | None = None) -> RuleOutcome:
        """All matching rules, deduplicated by id, most severe first (then block, escalate,
        flag, then by id).

        ``canonical`` is ``canonicalize(message.text)`` when the caller has it already.
        """
        if canonical is None:
            canonical = canonicalize(message.text)
        ids = self._match(message, canonical)
        mentioned: list[HitSpan] = []
        if ids - self._urgent:
            mentioned = mentioned_spans(canonical.text)
            if mentioned:
                unquoted = canonicalize(blank_spans(canonical.text, mentioned))
                ids = (ids & self._match(message, unquoted)) | (ids & self._urgent)
        if ids & self._yielding and is_report(canonical.text):
            ids -= self._yielding
        if not ids:
            return self._no_hits
        spans = self._spans(message.text, canonical, ids, mentioned) if self._spans_wanted else {}
        hits = sorted(
            (replace(self._hits[rule_id], spans=spans.get(rule_id, ())) for rule_id in ids),
            key=lambda hit: (-hit.severity, _ACTION_RANK[hit.action], hit.rule_id),
        )
        return RuleOutcome(hits=tuple(hits), severe=self.severe)

    def _spans(
        self, raw: str, canonical: CanonicalText, ids: set[str], mentioned: list[HitSpan]
    ) -> dict[str, tuple[HitSpan, ...]]:
        """Rule id -> where it matched in ``raw`` (module docs); nothing for a ``canonical``
        that is not ``raw``'s (``trace`` refuses it) or where the offsets cannot be mapped (an
        ``OffsetError``: the verdict stands without spans)."""
        try:
            traced = trace(raw, canonical)
            quoted = list(traced.text_map.raw_spans(canonical.text, mentioned))
            by_keyword = self._keywords.locate(ids, traced)
            located = {
                rule_id: self._locate(rule_id, traced, by_keyword.get(rule_id, []), quoted)
                for rule_id in ids
            }
        except OffsetError:
            return {}
        return {rule_id: spans for rule_id, spans in located.items() if spans}

    def _locate(
        self, rule_id: str, traced: TracedText, found: list[HitSpan], quoted: list[HitSpan]
    ) -> tuple[HitSpan, ...]:
        """Rule ``rule_id``'s spans: ``found`` (its keywords') and its patterns' and link
        check's, without those inside a span that did not count unless nothing else is left."""
        canonical = traced.canonical
        if self._patterns.has_rule(rule_id):
            for text, mapping in (
                (canonical.links, traced.links_map),
                *zip(canonical.leet, traced.leet_maps, strict=True),
            ):
                found.extend(mapping.raw_spans(text, self._patterns.locate(rule_id, text)))
        found.extend(
            traced.links_map.raw_spans(
                canonical.links, self._profile.locate(rule_id, canonical.links)
            )
        )
        left_out = [] if rule_id in self._urgent else list(quoted)
        exempt = self._keyword_exempt.get(rule_id)
        if exempt is not None:
            spans = (match.span() for match in exempt.finditer(canonical.text))
            left_out.extend(traced.text_map.raw_spans(canonical.text, spans))
        counted = [
            span
            for span in found
            if not any(low <= span[0] and span[1] <= high for low, high in left_out)
        ]
        return _merged(counted or found)[:MAX_SPANS]

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


def _merged(spans: list[HitSpan]) -> tuple[HitSpan, ...]:
    """``spans`` in order, overlapping ones joined."""
    merged: list[HitSpan] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)
