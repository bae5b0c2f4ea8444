"""Keyword rules: one Aho-Corasick automaton over the normalised text for all keyword lists."""

from __future__ import annotations

from collections.abc import Sequence

import ahocorasick

from pipelines.rules.config import KeywordRule

__all__ = ["KeywordMatcher", "is_boundary_char", "needs_boundary"]

# Scripts written without spaces between words: keywords in them match anywhere.
_UNSPACED_RANGES = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3100, 0x31FF),  # bopomofo, hangul compatibility jamo, kanbun, katakana extensions
    (0x3200, 0x9FFF),  # enclosed CJK, CJK extension A, CJK unified ideographs
    (0xA960, 0xA97F),  # hangul jamo extended-A
    (0xAC00, 0xD7FF),  # hangul syllables, jamo extended-B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)


def _is_unspaced(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _UNSPACED_RANGES)


def is_boundary_char(char: str) -> bool:
    """True when ``char`` belongs to a word of a space-separated script (letter or digit)."""
    return char.isalnum() and not _is_unspaced(char)


def needs_boundary(char: str) -> bool:
    """Whether a keyword starting or ending with ``char`` needs a word boundary on that side."""
    return is_boundary_char(char)


class KeywordMatcher:
    """Finds which keyword rules match a normalised text, in one pass over it."""

    __slots__ = ("_automaton", "_empty")

    def __init__(self, rules: Sequence[KeywordRule]) -> None:
        entries: dict[str, list[str]] = {}
        for rule in rules:
            for keyword in rule.keywords:
                entries.setdefault(keyword, []).append(rule.meta.id)
        self._automaton = ahocorasick.Automaton()
        for keyword, rule_ids in entries.items():
            value = (
                len(keyword),
                needs_boundary(keyword[0]),
                needs_boundary(keyword[-1]),
                tuple(rule_ids),
            )
            self._automaton.add_word(keyword, value)
        self._empty = not entries
        if entries:
            self._automaton.make_automaton()

    def match(self, text: str) -> set[str]:
        """The ids of the rules with at least one keyword in ``text`` (already normalised)."""
        found: set[str] = set()
        if self._empty or not text:
            return found
        last = len(text) - 1
        for end, (length, left, right, rule_ids) in self._automaton.iter(text):
            start = end - length + 1
            if left and start > 0 and is_boundary_char(text[start - 1]):
                continue
            if right and end < last and is_boundary_char(text[end + 1]):
                continue
            found.update(rule_ids)
        return found
