"""Chinese pinyin readings, so a keyword list written once in characters also matches its pinyin
spelling (``shabi``), its initials (``nmsl``) and its homophones (``煞笔``, ``傻比`` for
``傻逼``).

Readings come from pypinyin's character dictionary: each Han character reads as its first
(most common) pronunciation without tones, ``ü`` written ``v``. Syllables are compared in a
*fuzzy* form that also folds the near-homophones people swap on purpose or by accent: ``zh``,
``ch``, ``sh`` read ``z``, ``c``, ``s`` and final ``ang``, ``eng``, ``ing`` read ``an``, ``en``,
``in``. Each fuzzy syllable has a one-character code (a private-use code point), so a reading
is a plain string that an Aho-Corasick automaton can search.

A message with Han characters gets a ``PinyinReading``: the codes of the syllables of its Han
characters and of its Latin words that are one pinyin syllable each (``ni ma si le``), in order,
a space where a run is broken, and for each position the Han character it came from (a space
for a Latin word). Text without Han characters gets none.

A keyword of two or more Han characters gets ``KeywordForms`` when rules are loaded: its fuzzy
syllables (and their codes), its pinyin spellings (``shabi``) and its initials (``sb``). A
Latin word typed in pinyin or initials is its own reading: the keyword matcher looks the words
of the base text up among the keywords' spellings and initials (``pipelines.rules.keywords``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache

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
    "is_syllable_code",
    "keyword_forms",
    "pinyin_positions",
    "pinyin_reading",
    "syllable_codes",
]

_TONE_MARKS = frozenset("\u0300\u0301\u0304\u030c")
_FUZZY_INITIALS = (("zh", "z"), ("ch", "c"), ("sh", "s"))
_FUZZY_FINALS = (("ang", "an"), ("eng", "en"), ("ing", "in"))
_FIRST_CODE = 0xF0000  # supplementary private use area A
_BREAK = " "
_NOT_PINYIN = "|"  # stands in for a Latin word that is not a syllable; reads as a break
_ANY_LATIN = re.compile("[a-z]")
_LATIN_RUN = re.compile("[a-z]+")
_READ_UNIT = re.compile(r"[a-z]+|\S")


def _toneless(syllable: str) -> str:
    decomposed = unicodedata.normalize("NFD", syllable.lower())
    plain = unicodedata.normalize(
        "NFC", "".join(char for char in decomposed if char not in _TONE_MARKS)
    )
    return plain.replace("ü", "v")


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
def _all_syllables() -> frozenset[str]:
    """Every toneless reading in the dictionary, interjections such as ``m`` and ``hng``
    included."""
    found: set[str] = set()
    for entry in pinyin_dict.values():
        for reading in entry.split(","):
            plain = _toneless(reading)
            if plain.isascii() and plain.isalpha():
                found.add(plain)
    return frozenset(found)


@cache
def _syllables() -> frozenset[str]:
    """The syllables with a vowel: what a Latin word must be to read as pinyin."""
    return frozenset(s for s in _all_syllables() if any(vowel in s for vowel in "aeiouv"))


def is_syllable(word: str) -> bool:
    """Whether ``word`` is one toneless pinyin syllable (``she``, ``man`` and ``bin`` are)."""
    return word in _syllables()


@cache
def syllable_codes() -> dict[str, str]:
    """Fuzzy syllable -> its one-character code (stable for one pypinyin version)."""
    fuzzy_forms = sorted({fuzzy(syllable) for syllable in _all_syllables()})
    return {form: chr(_FIRST_CODE + index) for index, form in enumerate(fuzzy_forms)}


@cache
def _word_codes() -> dict[str, str]:
    codes = syllable_codes()
    return {syllable: codes[fuzzy(syllable)] for syllable in _syllables()}


def is_syllable_code(char: str) -> bool:
    """Whether ``char`` is a syllable code (the source of a Latin word read as pinyin)."""
    return _FIRST_CODE <= ord(char) < _FIRST_CODE + len(syllable_codes())


def char_syllable(char: str) -> str:
    """The toneless pinyin of the Han character ``char`` (its first reading), or ``""``."""
    entry = pinyin_dict.get(ord(char))
    return _toneless(entry.split(",", 1)[0]) if entry else ""


class _Codes(dict[int, str | None]):
    """A ``str.translate`` table, filled lazily: a Han character -> the code of its fuzzy
    syllable, a code -> itself, whitespace -> deleted, anything else -> a break."""

    def __missing__(self, code_point: int) -> str | None:
        char = chr(code_point)
        code: str | None
        if is_han(char):
            syllable = char_syllable(char)
            code = syllable_codes().get(fuzzy(syllable), _BREAK) if syllable else _BREAK
        elif is_syllable_code(char):
            code = char
        elif char.isspace():
            code = None
        else:
            code = _BREAK
        self[code_point] = code
        return code


class _Sources(dict[int, str | None]):
    """A ``str.translate`` table deleting whitespace (so sources line up with codes)."""

    def __missing__(self, code_point: int) -> str | None:
        char = chr(code_point)
        kept = None if char.isspace() else char
        self[code_point] = kept
        return kept


_CODES = _Codes()
_SOURCES = _Sources()


@dataclass(frozen=True, slots=True)
class PinyinReading:
    """The pinyin reading of one message (see the module docstring)."""

    codes: str = ""
    """One code per syllable (``syllable_codes``), a space where a run breaks."""
    sources: str = ""
    """For each code, the character it reads (the code itself for a Latin word); a Han
    character, or something else for a break."""

    @property
    def syllables(self) -> tuple[str, ...]:
        """The fuzzy syllables spelled out, ``""`` for a break (for reading and tests)."""
        names = {code: form for form, code in syllable_codes().items()}
        return tuple(names.get(code, "") for code in self.codes)


NO_PINYIN = PinyinReading()
"""The reading of a text without Han characters."""


def pinyin_reading(text: str) -> PinyinReading:
    """The pinyin reading of canonical ``text``; ``NO_PINYIN`` without Han characters."""
    if not has_han(text):
        return NO_PINYIN
    if _ANY_LATIN.search(text) is not None:
        words = _word_codes()
        text = _LATIN_RUN.sub(lambda match: words.get(match.group(), _NOT_PINYIN), text)
    return PinyinReading(codes=text.translate(_CODES), sources=text.translate(_SOURCES))


def pinyin_positions(text: str) -> tuple[tuple[int, int], ...]:
    """Where each code of ``pinyin_reading(text).codes`` comes from in ``text``: a Latin word,
    or one other character (whitespace reads nothing)."""
    if not has_han(text):
        return ()
    return tuple(match.span() for match in _READ_UNIT.finditer(text))


@dataclass(frozen=True, slots=True)
class KeywordForms:
    """The pinyin forms of one Chinese keyword."""

    syllables: tuple[str, ...]
    """Fuzzy syllables, one per character, for homophone matching."""
    codes: str
    """``syllables`` as codes, comparable with ``PinyinReading.codes``."""
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
    syllables = tuple(fuzzy(s) for s in per_char)
    codes = syllable_codes()
    return KeywordForms(
        syllables=syllables,
        codes="".join(codes[s] for s in syllables),
        spellings=tuple(spellings),
        initials="".join(s[0] for s in per_char),
    )


@cache
def dictionary_readings() -> dict[str, frozenset[str]]:
    """Codes of fuzzy syllables -> the words of pypinyin's phrase dictionary that read so.

    Used when rules are loaded: a keyword whose reading is also an ordinary word's (``贱人`` and
    ``兼任`` both read ``jian ren``) is not matched by homophones.
    """
    from pypinyin.phrases_dict import phrases_dict  # large; only needed at rule-load time

    codes = syllable_codes()
    readings: dict[str, set[str]] = {}
    for phrase, pinyins in phrases_dict.items():
        key = "".join(codes.get(fuzzy(_toneless(choices[0])), _BREAK) for choices in pinyins)
        readings.setdefault(key, set()).add(phrase)
    return {key: frozenset(words) for key, words in readings.items()}
