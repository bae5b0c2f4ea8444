"""Keyword rules: all keyword lists matched in one pass over the canonical text.

Keywords that begin with a letter of a space-separated script (Latin, Greek, Cyrillic, digits,
symbols) share one Aho-Corasick automaton. Keywords that begin with a character of an unspaced
script (Han, kana, hangul) are literals in one RE2 set instead (a DFA: which of them occur, in
one pass): pyahocorasick scans a node's children one by one, and thousands of distinct first
ideographs made every character of every message slow.

A keyword matches the canonical text or one of its leetspeak readings (``sh1t``), a ``*`` mask
that fits it (``f*ck``, ``pipelines.rules.masks``), or, for Chinese keywords, the message's pinyin
readings (``shabi``, ``nmsl``, ``煞笔``; ``pipelines.rules.pinyin_keywords``). Keywords of
space-separated scripts need word boundaries; Chinese keywords match anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence

import ahocorasick
import re2

from pipelines.canonical import CanonicalText, TracedText
from pipelines.canonical.scripts import is_han
from pipelines.rule_hits import HitSpan
from pipelines.rules.config import KeywordRule, compile_re2, compile_re2_set
from pipelines.rules.masks import MaskMatcher
from pipelines.rules.pinyin_keywords import PinyinKeywordMatcher

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


_LATIN_WORD = re.compile(r"(?<![a-z0-9])[a-z]+(?![a-z0-9])")
_UNSPACED_RE2_CLASS = (
    "[" + "".join(f"\\x{{{low:x}}}-\\x{{{high:x}}}" for low, high in _UNSPACED_RANGES) + "]"
)
_RIGHT_BOUNDARY = f"(?:$|[^\\p{{L}}\\p{{N}}]|{_UNSPACED_RE2_CLASS})"
"""RE2: what may follow a keyword ending in a letter or digit (see ``is_boundary_char``)."""


def _is_unspaced(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _UNSPACED_RANGES)


def is_boundary_char(char: str) -> bool:
    """True when ``char`` belongs to a word of a space-separated script (letter or digit)."""
    if char.isascii():
        return char.isalnum()
    return char.isalnum() and not _is_unspaced(char)


def needs_boundary(char: str) -> bool:
    """Whether a keyword starting or ending with ``char`` needs a word boundary on that side."""
    return is_boundary_char(char)


class KeywordMatcher:
    """Finds which keyword rules match a canonical text and its readings."""

    __slots__ = (
        "_automaton",
        "_empty",
        "_has_automaton",
        "_masks",
        "_pinyin",
        "_pinyin_words",
        "_unspaced",
        "_unspaced_by_rule",
        "_unspaced_ids",
    )

    def __init__(self, rules: Sequence[KeywordRule]) -> None:
        entries: dict[str, list[str]] = {}
        for rule in rules:
            for keyword in rule.keywords:
                entries.setdefault(keyword, []).append(rule.meta.id)
        self._unspaced_by_rule: dict[str, tuple[re2._Regexp, frozenset[str]]] = {}
        """Rule id -> its unspaced keywords as one RE2 alternation (longest first), and those of
        them that need a right boundary: for ``locate`` only."""
        for rule in rules:
            own = sorted({k for k in rule.keywords if _is_unspaced(k[0])}, key=len, reverse=True)
            if own:
                self._unspaced_by_rule[rule.meta.id] = (
                    compile_re2("|".join(re2.escape(k) for k in own), large=True),
                    frozenset(k for k in own if needs_boundary(k[-1])),
                )
        self._automaton = ahocorasick.Automaton()
        unspaced: list[tuple[str, tuple[str, ...]]] = []
        for keyword, rule_ids in entries.items():
            if _is_unspaced(keyword[0]):
                pattern = re2.escape(keyword)
                if needs_boundary(keyword[-1]):
                    pattern += _RIGHT_BOUNDARY
                unspaced.append((pattern, tuple(rule_ids)))
                continue
            value = (
                len(keyword),
                needs_boundary(keyword[0]),
                needs_boundary(keyword[-1]),
                tuple(rule_ids),
            )
            self._automaton.add_word(keyword, value)
        self._empty = not entries
        self._unspaced = compile_re2_set([pattern for pattern, _ in unspaced])
        self._unspaced_ids = tuple(rule_ids for _, rule_ids in unspaced)
        self._has_automaton = len(self._automaton) > 0
        if self._has_automaton:
            self._automaton.make_automaton()
        self._masks = MaskMatcher(entries)
        self._pinyin = PinyinKeywordMatcher(entries)
        words: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
        for word, rule_id, needs_han in self._pinyin.pinyin_words:
            anywhere, near_han = words.setdefault(word, ({}, {}))
            (near_han if needs_han else anywhere)[rule_id] = None
        self._pinyin_words = {
            word: (tuple(anywhere), tuple(near_han)) for word, (anywhere, near_han) in words.items()
        }

    def match(self, canonical: CanonicalText) -> set[str]:
        """The ids of the rules with a keyword in ``canonical`` or in one of its readings."""
        found = self.match_text(canonical.text)
        if self._empty:
            return found
        for reading in canonical.leet:
            found |= self.match_text(reading)
        if canonical.masks:
            found |= self._masks.match(canonical.masks)
        if self._pinyin_words:
            found |= self._match_pinyin_words(canonical.text)
        if canonical.pinyin.codes:
            found |= self._pinyin.match(canonical.pinyin)
        return found

    def match_text(self, text: str) -> set[str]:
        """The ids of the rules with at least one keyword literally in ``text`` (canonical)."""
        found: set[str] = set()
        if self._empty or not text:
            return found
        last = len(text) - 1
        if self._unspaced is not None and not text.isascii():
            for index in self._unspaced.Match(text) or ():
                found.update(self._unspaced_ids[index])
        if not self._has_automaton:
            return found
        for end, (length, left, right, rule_ids) in self._automaton.iter(text):
            if _bounded(text, end - length + 1, end + 1, left, right, last):
                found.update(rule_ids)
        return found

    def _match_pinyin_words(self, text: str) -> set[str]:
        """Rules whose Chinese keywords a Latin word of ``text`` spells in pinyin or initials."""
        found: set[str] = set()
        words = self._pinyin_words.keys() & _LATIN_WORD.findall(text)
        for word in words:
            anywhere, near_han = self._pinyin_words[word]
            found.update(anywhere)
            if near_han and _touches_han(text, word):
                found.update(near_han)
        return found

    def locate(self, rule_ids: Collection[str], traced: TracedText) -> dict[str, list[HitSpan]]:
        """Where the keywords of the rules ``rule_ids`` occur in the raw text: in the canonical
        text, its leetspeak readings, its masks, its pinyin words and its pinyin reading (every
        way ``match`` finds them), mapped back through ``traced``; rules without any are left
        out."""
        wanted = set(rule_ids)
        canonical = traced.canonical
        found: dict[str, list[HitSpan]] = {}
        leet = zip(canonical.leet, traced.leet_maps, strict=True)
        for text, mapping in ((canonical.text, traced.text_map), *leet):
            if len(mapping) != len(text):
                continue
            for rule_id, start, end in self._occurrences(text, wanted):
                found.setdefault(rule_id, []).append(mapping.raw_span(start, end))
        for mask, span in zip(canonical.masks, traced.mask_spans, strict=True):
            for rule_id in self._masks.match((mask,)) & wanted:
                found.setdefault(rule_id, []).append(span)
        if self._pinyin_words and len(traced.text_map) == len(canonical.text):
            text = canonical.text
            for match in _LATIN_WORD.finditer(text):
                anywhere, near_han = self._pinyin_words.get(match.group(), ((), ()))
                start, end = match.span()
                ids = [*anywhere, *(near_han if _span_touches_han(text, start, end) else ())]
                for rule_id in wanted.intersection(ids):
                    found.setdefault(rule_id, []).append(traced.text_map.raw_span(start, end))
        codes = canonical.pinyin.codes
        if codes and len(traced.pinyin_map) == len(codes):
            for rule_id, start, end in self._pinyin.locate(wanted, canonical.pinyin):
                found.setdefault(rule_id, []).append(traced.pinyin_map.raw_span(start, end))
        return found

    def _occurrences(self, text: str, wanted: set[str]) -> Iterator[tuple[str, int, int]]:
        """``(rule id, start, end)`` of each keyword of the ``wanted`` rules in ``text``, as
        ``match_text`` counts them (word boundaries where the keyword's script needs them)."""
        last = len(text) - 1
        if self._has_automaton:
            for end, (length, left, right, rule_ids) in self._automaton.iter(text):
                start = end - length + 1
                if _bounded(text, start, end + 1, left, right, last):
                    for rule_id in wanted.intersection(rule_ids):
                        yield rule_id, start, end + 1
        if text.isascii():
            return
        for rule_id in wanted & self._unspaced_by_rule.keys():
            regex, bounded = self._unspaced_by_rule[rule_id]
            for match in regex.finditer(text):
                start, end = match.span()
                if _bounded(text, start, end, False, match.group() in bounded, last):
                    yield rule_id, start, end


def _bounded(text: str, start: int, end: int, left: bool, right: bool, last: int) -> bool:
    """Whether ``text[start:end]`` is a whole word where ``left`` / ``right`` ask for a boundary
    (``last``: the text's last index)."""
    if left and start > 0 and is_boundary_char(text[start - 1]):
        return False
    return not (right and end <= last and is_boundary_char(text[end]))


def _span_touches_han(text: str, start: int, end: int) -> bool:
    return (start > 0 and is_han(text[start - 1])) or (end < len(text) and is_han(text[end]))


def _touches_han(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` as a word written right against a Han character."""
    for match in re.finditer(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", text):
        start, end = match.span()
        if (start > 0 and is_han(text[start - 1])) or (end < len(text) and is_han(text[end])):
            return True
    return False
