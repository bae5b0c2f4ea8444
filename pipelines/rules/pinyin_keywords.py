"""Chinese keywords matched through their pinyin: spellings, initials and homophones.

For every keyword of two or more Han characters, ``pipelines.canonical.keyword_forms`` gives:

* its pinyin spelling (``傻逼`` -> ``shabi``): matches a Latin word of the message spelled so;
* its initials (``你妈死了`` -> ``nmsl``): matches a Latin word of the message; two-letter
  initials (``sb``) only when the word is written against a Han character (``你个sb``), since
  ``sb``, ``by`` or ``ll`` alone are as likely English;
* its fuzzy syllables (``sa bi``): match the same syllables in the message (``煞笔``, ``沙比``),
  unless an ordinary word of pypinyin's phrase dictionary that is not itself a keyword reads the
  same (``贱人`` is not matched by ``兼任``). A two-syllable homophone must also share a
  character with a keyword of that reading (``傻比`` matches ``傻逼``; ``你个`` does not match
  ``尼哥``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipelines.canonical import PinyinReading, keyword_forms
from pipelines.canonical.pinyin import dictionary_readings

__all__ = ["PinyinKeywordMatcher"]

_SHORT_SYLLABLES = 2
_SHORT_INITIALS = 2


class PinyinKeywordMatcher:
    """Matches the pinyin readings of a message against the pinyin forms of the keywords."""

    __slots__ = ("_han_initials", "_initials", "_lengths", "_spellings", "_syllables")

    def __init__(self, keywords: Mapping[str, Sequence[str]]) -> None:
        """``keywords``: canonical keyword -> ids of the rules listing it."""
        self._spellings: dict[str, set[str]] = {}
        self._initials: dict[str, set[str]] = {}
        self._han_initials: dict[str, set[str]] = {}
        syllables: dict[tuple[str, ...], tuple[set[str], set[str]]] = {}
        for keyword, rule_ids in keywords.items():
            forms = keyword_forms(keyword)
            if forms is None:
                continue
            for spelling in forms.spellings:
                self._spellings.setdefault(spelling, set()).update(rule_ids)
            short = len(forms.initials) <= _SHORT_INITIALS
            initials = self._han_initials if short else self._initials
            initials.setdefault(forms.initials, set()).update(rule_ids)
            ids, chars = syllables.setdefault(forms.syllables, (set(), set()))
            ids.update(rule_ids)
            chars.update(keyword)
        self._syllables: dict[tuple[str, ...], tuple[frozenset[str], frozenset[str] | None]] = {}
        if syllables:
            dictionary = dictionary_readings()
            for reading, (ids, chars) in syllables.items():
                ordinary = dictionary.get(reading, frozenset()) - set(keywords)
                if ordinary:
                    continue
                shared = frozenset(chars) if len(reading) <= _SHORT_SYLLABLES else None
                self._syllables[reading] = (frozenset(ids), shared)
        self._lengths = sorted({len(reading) for reading in self._syllables})

    def match(self, reading: PinyinReading) -> set[str]:
        """The ids of the rules whose Chinese keywords the message spells in pinyin."""
        found: set[str] = set()
        for word in reading.words:
            found.update(self._spellings.get(word, ()))
            found.update(self._initials.get(word, ()))
        for word in reading.han_words:
            found.update(self._han_initials.get(word, ()))
        syllables = reading.syllables
        if not self._lengths or len(syllables) < self._lengths[0]:
            return found
        for length in self._lengths:
            for start in range(len(syllables) - length + 1):
                entry = self._syllables.get(syllables[start : start + length])
                if entry is None:
                    continue
                rule_ids, shared = entry
                sources = reading.sources[start : start + length]
                if shared is not None and not shared.intersection(sources):
                    continue
                found.update(rule_ids)
        return found
