"""Chinese keywords matched through their homophones, and the pinyin words that spell them.

For every keyword of two or more Han characters, ``pipelines.canonical.keyword_forms`` gives:

* its fuzzy syllables (``sa bi`` for ``傻逼``): they match the same syllables in a message's
  ``PinyinReading`` (``煞笔``, ``傻比``), through one Aho-Corasick automaton over syllable codes,
  unless an ordinary word of pypinyin's phrase dictionary that is not itself a keyword reads the
  same (``贱人`` is not matched by ``兼任``). A two-syllable homophone must also share a
  character with a keyword of that reading (``傻比`` matches ``傻逼``; ``你个`` does not match
  ``尼哥``);
* ``pinyin_words``: its pinyin spellings (``shabi``) and initials (``nmsl``) as Latin words for
  the keyword matcher to look up; two-letter initials (``sb``) only count written against a Han
  character (``你个sb``), since ``sb``, ``by`` or ``ll`` alone are as likely English, and
  initials with a vowel (a syllable without an initial consonant: ``爱你们`` gives ``anm``) are
  not used at all, since English words are made of such letter strings (``the``, ``you``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ahocorasick

from pipelines.canonical import PinyinReading, keyword_forms
from pipelines.canonical.pinyin import dictionary_readings

__all__ = ["PinyinKeywordMatcher", "PinyinWord"]

_SHORT_SYLLABLES = 2
_SHORT_INITIALS = 2
_VOWELS = frozenset("aeiouv")

PinyinWord = tuple[str, str, bool]
"""(Latin word, rule id, whether it must touch a Han character)."""


class PinyinKeywordMatcher:
    """Matches the pinyin reading of a message against the syllables of the keywords."""

    __slots__ = ("_automaton", "pinyin_words")

    def __init__(self, keywords: Mapping[str, Sequence[str]]) -> None:
        """``keywords``: canonical keyword -> ids of the rules listing it."""
        words: list[PinyinWord] = []
        readings: dict[str, tuple[set[str], set[str]]] = {}
        for keyword, rule_ids in keywords.items():
            forms = keyword_forms(keyword)
            if forms is None:
                continue
            short = len(forms.initials) <= _SHORT_INITIALS
            consonants = not _VOWELS.intersection(forms.initials)
            for rule_id in rule_ids:
                words.extend((spelling, rule_id, False) for spelling in forms.spellings)
                if consonants:
                    words.append((forms.initials, rule_id, short))
            ids, chars = readings.setdefault(forms.codes, (set(), set()))
            ids.update(rule_ids)
            chars.update(keyword)
        self.pinyin_words: tuple[PinyinWord, ...] = tuple(words)
        """The Latin words that spell a keyword, for the keyword matcher."""
        self._automaton: ahocorasick.Automaton | None = None
        if not readings:
            return
        dictionary = dictionary_readings()
        automaton = ahocorasick.Automaton()
        for codes, (ids, chars) in readings.items():
            if dictionary.get(codes, frozenset()) - set(keywords):
                continue  # an ordinary word reads the same: homophones would be false alarms
            shared = frozenset(chars) if len(codes) <= _SHORT_SYLLABLES else None
            automaton.add_word(codes, (len(codes), tuple(sorted(ids)), shared))
        if len(automaton):
            automaton.make_automaton()
            self._automaton = automaton

    def match(self, reading: PinyinReading) -> set[str]:
        """The ids of the rules with a keyword that the message says in homophones."""
        found: set[str] = set()
        if self._automaton is None or not reading.codes:
            return found
        for end, (length, rule_ids, shared) in self._automaton.iter(reading.codes):
            if shared is not None and shared.isdisjoint(
                reading.sources[end - length + 1 : end + 1]
            ):
                continue
            found.update(rule_ids)
        return found
