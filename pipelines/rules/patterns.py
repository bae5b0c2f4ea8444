"""Regex rules: the patterns in RE2 sets of :data:`SHARD_PATTERNS` each, in rule order, each
searched once over the canonical text (``CanonicalText.links``: defanged links restored).

One set holding every pattern builds a DFA whose states combine all of them; with the default
rule set's 440 patterns that DFA outgrew its memory budget over a few thousand different
messages, and a DFA that runs out of memory throws its cache away and rebuilds it, message after
message: rule evaluation took about 390 us per message over 42,000 dev, probe, written and
held-out lines (17 us over the first 3,000, while the cache still held). Sets of 64 patterns
each stay within the budget: 21 us over the same 42,000 lines (2 sets of 256: 183 us, 4 of
128: 78 us, 14 of 32: 30 us), the same hits on every line.

RE2 runs in time linear in the text whatever the pattern; patterns it cannot express
(back-references, look-around) are rejected when the rule file is loaded.

A rule with ``exempt`` spans is checked a second time, only when the set says it matched: its
exempt spans are blanked and its own patterns searched again, so a hit that lies only inside an
exempt span ("he keeps telling me to kill myself": reported speech) does not count, while one
elsewhere in the message still does. Look-around would say the same in one pattern; RE2 has none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import re2

from pipelines.rules.config import MatchMode, RegexRule, compile_re2, compile_re2_set

__all__ = ["SHARD_PATTERNS", "PatternMatcher"]

SHARD_PATTERNS = 64
"""Patterns per RE2 set (module docstring)."""


class PatternMatcher:
    """Finds which regex rules match a canonical text."""

    __slots__ = ("_exempt", "_owners", "_patterns_of", "_rules", "_sets", "compiled")

    def __init__(self, rules: Sequence[RegexRule]) -> None:
        self._rules = tuple(rules)
        self.compiled: tuple[re2._Regexp, ...] = tuple(
            compile_re2(pattern) for rule in self._rules for pattern in rule.patterns
        )
        """Each pattern compiled on its own by RE2, in rule order (matching uses the set; a rule
        with exempt spans is searched again with its own compiled patterns)."""
        self._owners = [owner for owner, rule in enumerate(self._rules) for _ in rule.patterns]
        self._patterns_of: dict[str, tuple[int, tuple[re2._Regexp, ...]]] = {
            rule.meta.id: (
                owner,
                tuple(c for c, o in zip(self.compiled, self._owners, strict=True) if o == owner),
            )
            for owner, rule in enumerate(self._rules)
        }
        """Rule id -> its index and its compiled patterns (``locate``)."""
        patterns = [pattern for rule in self._rules for pattern in rule.patterns]
        self._sets = tuple(
            (start, regex_set)
            for start in range(0, len(patterns), SHARD_PATTERNS)
            if (regex_set := compile_re2_set(patterns[start : start + SHARD_PATTERNS])) is not None
        )
        self._exempt: dict[int, tuple[re2._Regexp, tuple[re2._Regexp, ...]]] = {
            owner: (
                compile_re2("|".join(f"(?:{span})" for span in rule.exempt)),
                tuple(c for c, o in zip(self.compiled, self._owners, strict=True) if o == owner),
            )
            for owner, rule in enumerate(self._rules)
            if rule.exempt
        }

    def match(self, text: str) -> set[str]:
        """The ids of the rules whose patterns match ``text`` (``CanonicalText.links``)."""
        matched = [
            start + index
            for start, regex_set in self._sets
            for index in regex_set.Match(text) or ()  # None when nothing matched
        ]
        if not matched:
            return set()
        counts: dict[int, int] = {}
        for index in matched:
            owner = self._owners[index]
            counts[owner] = counts.get(owner, 0) + 1
        found: set[str] = set()
        for owner, count in counts.items():
            rule = self._rules[owner]
            whole = rule.match is MatchMode.ANY or count == len(rule.patterns)
            if whole and (owner not in self._exempt or self._outside_exempt(owner, text)):
                found.add(rule.meta.id)
        return found

    def _outside_exempt(self, owner: int, text: str) -> bool:
        exempt, patterns = self._exempt[owner]
        blanked = exempt.sub(" ", text)
        if blanked == text:
            return True
        hits = (pattern.search(blanked) is not None for pattern in patterns)
        return any(hits) if self._rules[owner].match is MatchMode.ANY else all(hits)

    def has_rule(self, rule_id: str) -> bool:
        """Whether ``rule_id`` is one of this matcher's regex rules."""
        return rule_id in self._patterns_of

    def locate(self, rule_id: str, text: str) -> Iterator[tuple[int, int]]:
        """Where the patterns of rule ``rule_id`` match ``text``, leaving out matches that lie
        inside its exempt spans."""
        if rule_id not in self._patterns_of:
            return
        owner, patterns = self._patterns_of[rule_id]
        exempt = (
            [match.span() for match in self._exempt[owner][0].finditer(text)]
            if owner in self._exempt
            else []
        )
        for pattern in patterns:
            for match in pattern.finditer(text):
                start, end = match.span()
                if end > start and not any(low <= start and end <= high for low, high in exempt):
                    yield start, end
