"""Chinese pinyin readings, so a keyword list written once in characters also matches its pinyin
spelling (``shabi``), its initials (``nmsl``) and its homophones (``煞笔``, ``傻比`` for
``傻逼``).

Readings come from pypinyin's character dictionary: each Han character reads as its first
(most common) pronunciation without tones, ``ü`` written ``v``. Syllables are compared in a
*fuzzy* form that also folds the near-homophones people swap on purpose or by accent: ``zh``,
``ch``, ``sh`` read ``z``, ``c``, ``s`` and final ``ang``, ``eng``, ``ing`` read ``an``, ``en``,
``in``.

A message gets:

* ``syllables``: the fuzzy syllables of its Han characters and of its Latin words that are one
  pinyin syllable each (``ni ma si le``), in order, with ``""`` where a run is broken, and
  ``sources``: for each syllable the Han character it came from, or a space for a Latin word;
* ``words``: its Latin words that are spelled in pinyin (``shabi``) or in initials only
  (``nmsl``, ``sb``), and ``han_words``: those written right against a Han character
  (``你个sb``).

A keyword gets its fuzzy syllables, its pinyin spellings and its initials from ``keyword_forms``
when the rules are loaded; the matcher compares the two.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache

from pypinyin import Style, lazy_pinyin
from pypinyin.pinyin_dict import pinyin_dict

from pipelines.canonical.scripts import has_han, is_han

__all__ = [
    "NO_PINYIN",
    "KeywordForms",
    "PinyinReading",
    "char_syllable",
    "dictionary_readings",
    "fuzzy",
    "is_syllable",
    "keyword_forms",
    "looks_like_pinyin",
    "pinyin_reading",
]

_TONE_MARKS = frozenset("\u0300\u0301\u0304\u030c")
_FUZZY_INITIALS = (("zh", "z"), ("ch", "c"), ("sh", "s"))
_FUZZY_FINALS = (("ang", "an"), ("eng", "en"), ("ing", "in"))
_INITIAL_LETTERS = "bpmfdtnlgkhjqxzcsryw"
_LATIN_WORD = re.compile(r"[a-z]+")
_INITIALS_ONLY = re.compile(f"[{_INITIAL_LETTERS}]{{2,8}}")
_MAX_WORD = 30
_LONGEST_SYLLABLE = 6


def _toneless(syllable: str) -> str:
    decomposed = unicodedata.normalize("NFD", syllable.lower())
    plain = unicodedata.normalize(
        "NFC", "".join(char for char in decomposed if char not in _TONE_MARKS)
    )
    return plain.replace("ü", "v")


_CACHE: dict[str, str] = {}


def char_syllable(char: str) -> str:
    """The toneless pinyin of the Han character ``char`` (its first reading), or ``""``."""
    cached = _CACHE.get(char)
    if cached is None:
        entry = pinyin_dict.get(ord(char))
        cached = _toneless(entry.split(",", 1)[0]) if entry else ""
        _CACHE[char] = cached
    return cached


def fuzzy(syllable: str) -> str:
    """``syllable`` with near-homophone distinctions folded (``shi`` -> ``si``, ``bing`` ->
    ``bin``)."""
    for long, short in _FUZZY_INITIALS:
        if syllable.startswith(long):
            syllable = short + syllable[len(long) :]
            break
    for long, short in _FUZZY_FINALS:
        if syllable.endswith(long):
            return syllable[: -len(long)] + short
    return syllable


@cache
def _syllables() -> frozenset[str]:
    found: set[str] = set()
    for entry in pinyin_dict.values():
        for reading in entry.split(","):
            plain = _toneless(reading)
            if plain.isascii() and plain.isalpha() and any(v in plain for v in "aeiouv"):
                found.add(plain)
    return frozenset(found)


@lru_cache(maxsize=1 << 16)
def looks_like_pinyin(word: str) -> bool:
    """Whether the lower-case Latin ``word`` is spelled in pinyin syllables (``shabi``,
    ``nimasile``) or in pinyin initials only (``nmsl``, ``sb``)."""
    if not 2 <= len(word) <= _MAX_WORD:
        return False
    if _INITIALS_ONLY.fullmatch(word):
        return True
    syllables = _syllables()
    reachable = [True] + [False] * len(word)
    for end in range(1, len(word) + 1):
        for start in range(max(0, end - _LONGEST_SYLLABLE), end):
            if reachable[start] and word[start:end] in syllables:
                reachable[end] = True
                break
    return reachable[-1]


def is_syllable(word: str) -> bool:
    """Whether ``word`` is one toneless pinyin syllable (``she``, ``man`` and ``bin`` are)."""
    return word in _syllables()


@dataclass(frozen=True, slots=True)
class PinyinReading:
    """The pinyin readings of one message (see the module docstring)."""

    syllables: tuple[str, ...] = ()
    sources: str = ""
    words: tuple[str, ...] = ()
    han_words: tuple[str, ...] = ()


NO_PINYIN = PinyinReading()
"""The reading of a text with no Han characters and no pinyin-looking words."""


def pinyin_reading(text: str) -> PinyinReading:
    """The pinyin readings of canonical ``text``; empty for text with neither Han characters nor
    pinyin-looking Latin words."""
    if not has_han(text):
        words = tuple(word for word in _LATIN_WORD.findall(text) if looks_like_pinyin(word))
        return PinyinReading(words=words) if words else NO_PINYIN
    syllables: list[str] = []
    sources: list[str] = []
    words_found: list[str] = []
    han_words: list[str] = []
    known = _syllables()

    def brk() -> None:
        if syllables and syllables[-1]:
            syllables.append("")
            sources.append(" ")

    position = 0
    length = len(text)
    while position < length:
        char = text[position]
        if is_han(char):
            syllable = char_syllable(char)
            if syllable:
                syllables.append(fuzzy(syllable))
                sources.append(char)
            else:
                brk()
            position += 1
        elif "a" <= char <= "z":
            match = _LATIN_WORD.match(text, position)
            assert match is not None
            word, end = match.group(), match.end()
            if looks_like_pinyin(word):
                words_found.append(word)
                before = position > 0 and is_han(text[position - 1])
                if before or (end < length and is_han(text[end])):
                    han_words.append(word)
            if word in known:
                syllables.append(fuzzy(word))
                sources.append(" ")
            else:
                brk()
            position = end
        else:
            if not char.isspace():
                brk()
            position += 1
    if not words_found and not any(syllables):
        return NO_PINYIN
    return PinyinReading(
        syllables=tuple(syllables),
        sources="".join(sources),
        words=tuple(words_found),
        han_words=tuple(han_words),
    )


@dataclass(frozen=True, slots=True)
class KeywordForms:
    """The pinyin forms of one Chinese keyword."""

    syllables: tuple[str, ...]
    """Fuzzy syllables, one per character, for homophone matching."""
    spellings: tuple[str, ...]
    """Toneless pinyin without spaces (``shabi``), per character and phrase-aware."""
    initials: str
    """First letters of the syllables (``nmsl``)."""


def keyword_forms(keyword: str) -> KeywordForms | None:
    """The pinyin forms of ``keyword`` (canonical), or ``None`` unless it is two or more Han
    characters and nothing else."""
    if len(keyword) < 2 or not all(is_han(char) for char in keyword):
        return None
    per_char = [char_syllable(char) for char in keyword]
    if not all(per_char):
        return None
    phrase = [_toneless(s) for s in lazy_pinyin(keyword, style=Style.NORMAL)]
    spellings = dict.fromkeys(("".join(per_char), "".join(phrase)))
    return KeywordForms(
        syllables=tuple(fuzzy(s) for s in per_char),
        spellings=tuple(spellings),
        initials="".join(s[0] for s in per_char),
    )


@cache
def dictionary_readings() -> dict[tuple[str, ...], frozenset[str]]:
    """Fuzzy syllables -> the words of pypinyin's phrase dictionary that read so.

    Used when rules are loaded: a keyword whose reading is also an ordinary word's (``贱人`` and
    ``兼任`` both read ``jian ren``) is not matched by homophones.
    """
    from pypinyin.phrases_dict import phrases_dict  # large; only needed at rule-load time

    readings: dict[tuple[str, ...], set[str]] = {}
    for phrase, pinyins in phrases_dict.items():
        key = tuple(fuzzy(_toneless(choices[0])) for choices in pinyins)
        readings.setdefault(key, set()).add(phrase)
    return {key: frozenset(words) for key, words in readings.items()}
