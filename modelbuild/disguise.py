"""Disguise transforms: how people spell a harmful line so that filters miss it.

``disguise(text, lang, rng)`` returns one :class:`Disguised` per applicable transform, each named
(the names are stable, for reports and for training-data augmentation). Every transform is pure
given ``rng``: the same seed gives the same output.

``targets`` names the spans to disguise (the insult, the threat's verb, the contact handle),
as people disguise the word that would be caught and leave the rest alone; without targets the
span transforms apply to every word (English) or every run of Chinese characters.

English (``EN_TRANSFORMS``): ``leet`` (digit and symbol substitution), ``mask`` (``*`` over
inner letters), ``split_space`` / ``split_symbol`` / ``split_emoji`` (letters separated by
spaces, by one of ``. - _ * | /``, by an emoji), ``homoglyph`` (Cyrillic and Greek look-alike
letters mixed into the Latin word), ``math_letters`` (one Unicode mathematical alphabet),
``zero_width`` (invisible characters between letters), ``fullwidth`` (full-width forms),
``alternating_case`` and ``emoji_word`` (an emoji standing for a word: a pig for "pig").

Chinese (``ZH_TRANSFORMS``): ``split_space`` / ``split_symbol`` (characters separated),
``mask`` (one character replaced by ``*``, ``X``, a circle, a multiplication sign), ``zero_width``,
``traditional`` (the whole line through OpenCC ``s2t``), ``pinyin`` (the span in toneless
pinyin), ``pinyin_initials`` (first letters of the pinyin, as in two-letter insult
abbreviations), ``homophone`` (characters swapped for others with the same toneless pinyin, see
:mod:`modelbuild.homophones`) and ``emoji_word``.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pypinyin import Style, lazy_pinyin

from modelbuild.homophones import pick_homophone, toneless

__all__ = [
    "EN_TRANSFORMS",
    "SPLIT_EMOJI",
    "SPLIT_SYMBOLS",
    "ZERO_WIDTH",
    "ZH_MASKS",
    "ZH_TRANSFORMS",
    "Disguised",
    "apply_transform",
    "disguise",
    "transforms_for",
]

EN_TRANSFORMS: tuple[str, ...] = (
    "leet",
    "mask",
    "split_space",
    "split_symbol",
    "split_emoji",
    "homoglyph",
    "math_letters",
    "zero_width",
    "fullwidth",
    "alternating_case",
    "emoji_word",
)
ZH_TRANSFORMS: tuple[str, ...] = (
    "split_space",
    "split_symbol",
    "mask",
    "zero_width",
    "traditional",
    "pinyin",
    "pinyin_initials",
    "homophone",
    "emoji_word",
)
ZERO_WIDTH: tuple[str, ...] = ("\u200b", "\u200c", "\u200d", "\u2060")
"""Zero-width space, non-joiner, joiner and word joiner."""

SPLIT_SYMBOLS: tuple[str, ...] = (".", "-", "_", "*", "|", "/")
SPLIT_EMOJI: tuple[str, ...] = ("\U0001f525", "\u2764\ufe0f", "\U0001f602", "\u2b50", "\U0001f4a5")
"""Fire, red heart, tears of joy, star, collision."""
ZH_MASKS: tuple[str, ...] = ("*", "X", "\u25cb", "\u00d7")

_LEET: dict[str, str] = {
    "a": "4@",
    "e": "3",
    "i": "1!",
    "o": "0",
    "s": "5$",
    "t": "7",
    "l": "1",
    "g": "9",
    "b": "8",
}
# Latin letter -> look-alikes from the Cyrillic and Greek blocks (lower case).
_HOMOGLYPHS: dict[str, str] = {
    "a": "\u0430\u03b1",  # Cyrillic a, Greek alpha
    "c": "\u0441",  # Cyrillic es
    "e": "\u0435",  # Cyrillic ie
    "i": "\u0456\u03b9",  # Cyrillic byelorussian-ukrainian i, Greek iota
    "j": "\u0458",  # Cyrillic je
    "k": "\u03ba",  # Greek kappa
    "n": "\u03b7",  # Greek eta
    "o": "\u043e\u03bf",  # Cyrillic o, Greek omicron
    "p": "\u0440\u03c1",  # Cyrillic er, Greek rho
    "s": "\u0455",  # Cyrillic dze
    "t": "\u03c4",  # Greek tau
    "u": "\u03c5",  # Greek upsilon
    "v": "\u03bd",  # Greek nu
    "x": "\u0445\u03c7",  # Cyrillic ha, Greek chi
    "y": "\u0443",  # Cyrillic u
}
_MATH_STYLES: tuple[str, ...] = (
    "MATHEMATICAL BOLD",
    "MATHEMATICAL ITALIC",
    "MATHEMATICAL BOLD ITALIC",
    "MATHEMATICAL SCRIPT",
    "MATHEMATICAL FRAKTUR",
    "MATHEMATICAL DOUBLE-STRUCK",
    "MATHEMATICAL SANS-SERIF",
    "MATHEMATICAL SANS-SERIF BOLD",
    "MATHEMATICAL MONOSPACE",
)
# Whole words an emoji commonly stands for (checked on word boundaries, case-insensitively).
_EN_EMOJI: dict[str, str] = {
    "pig": "\U0001f437",
    "pigs": "\U0001f437\U0001f437",
    "dog": "\U0001f436",
    "dogs": "\U0001f436\U0001f436",
    "snake": "\U0001f40d",
    "rat": "\U0001f400",
    "rats": "\U0001f400\U0001f400",
    "monkey": "\U0001f412",
    "monkeys": "\U0001f412\U0001f412",
    "ape": "\U0001f98d",
    "apes": "\U0001f98d\U0001f98d",
    "cow": "\U0001f404",
    "clown": "\U0001f921",
    "shit": "\U0001f4a9",
    "crap": "\U0001f4a9",
    "die": "\U0001f480",
    "dead": "\U0001f480",
    "kill": "\U0001f52a",
    "knife": "\U0001f52a",
    "stab": "\U0001f52a",
    "gun": "\U0001f52b",
    "shoot": "\U0001f52b",
    "bomb": "\U0001f4a3",
    "burn": "\U0001f525",
    "money": "\U0001f4b0",
    "cash": "\U0001f4b5",
    "dick": "\U0001f346",
    "ass": "\U0001f351",
    "trash": "\U0001f5d1\ufe0f",
    "garbage": "\U0001f5d1\ufe0f",
    "rope": "\U0001faa2",
    "pics": "\U0001f4f8",
    "nudes": "\U0001f4f8",
}
_ZH_EMOJI: dict[str, str] = {
    "猪": "\U0001f437",
    "狗": "\U0001f436",
    "死": "\U0001f480",
    "杀": "\U0001f52a",
    "砍": "\U0001f52a",
    "刀": "\U0001f52a",
    "枪": "\U0001f52b",
    "屎": "\U0001f4a9",
    "猴子": "\U0001f412",
    "猴": "\U0001f412",
    "蛇": "\U0001f40d",
    "鸡": "\U0001f414",
    "垃圾": "\U0001f5d1\ufe0f",
    "钱": "\U0001f4b0",
    "炸": "\U0001f4a3",
    "小丑": "\U0001f921",
    "草": "\U0001f33f",
    "操": "\U0001f33f",
    "妈": "\U0001f434",
    "马": "\U0001f434",
    "鬼": "\U0001f47b",
    "蛆": "\U0001f41b",
    "火": "\U0001f525",
}
_EN_WORD = re.compile(r"[A-Za-z]+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")

Span = Callable[[str, random.Random], str]


@dataclass(frozen=True, slots=True)
class Disguised:
    """One disguised form of a line and the transform that made it."""

    text: str
    transform: str


def transforms_for(lang: str) -> tuple[str, ...]:
    """The transform names for ``lang`` (``en`` or ``zh``)."""
    if lang == "en":
        return EN_TRANSFORMS
    if lang == "zh":
        return ZH_TRANSFORMS
    raise ValueError(f"no disguise transforms for language {lang!r}")


def disguise(
    text: str,
    lang: str,
    rng: random.Random,
    *,
    targets: Sequence[str] = (),
    names: Sequence[str] | None = None,
) -> list[Disguised]:
    """Every applicable disguise of ``text`` (those that change it), in ``names`` order
    (default: all of the language's transforms)."""
    out: list[Disguised] = []
    for name in names if names is not None else transforms_for(lang):
        changed = apply_transform(name, text, lang, rng, targets=targets)
        if changed is not None:
            out.append(Disguised(changed, name))
    return out


def apply_transform(
    name: str, text: str, lang: str, rng: random.Random, *, targets: Sequence[str] = ()
) -> str | None:
    """``text`` disguised by the transform ``name``, or ``None`` when it does not apply (nothing
    it could change)."""
    if name not in transforms_for(lang):
        raise ValueError(f"unknown {lang} transform {name!r}")
    if name == "traditional":
        result = _opencc_s2t().convert(text)
    elif name == "emoji_word":
        result = _emoji_words(text, _EN_EMOJI if lang == "en" else _ZH_EMOJI, lang)
    else:
        span = (_EN_SPANS if lang == "en" else _ZH_SPANS)[name]
        result = _on_spans(text, lang, targets, lambda s: span(s, rng))
    return result if result != text else None


# -- where a transform applies ---------------------------------------------------------------


def _on_spans(text: str, lang: str, targets: Sequence[str], change: Callable[[str], str]) -> str:
    """``change`` applied to every occurrence of each target (longest first), or, without
    targets, to every English word or every run of Chinese characters."""
    if targets:
        ordered = sorted(set(targets), key=lambda t: (-len(t), t))
        missing = [t for t in ordered if t not in text]
        if missing:
            raise ValueError(f"targets {missing!r} are not in {text!r}")
        pattern = re.compile("|".join(re.escape(t) for t in ordered))
    else:
        pattern = _EN_WORD if lang == "en" else _HAN
    return pattern.sub(lambda m: change(m.group(0)), text)


def _words(span: str, change: Callable[[str], str]) -> str:
    """``change`` applied to each Latin word of ``span``; spaces and punctuation are kept."""
    return _EN_WORD.sub(lambda m: change(m.group(0)), span)


def _han(span: str, change: Callable[[str], str]) -> str:
    return _HAN.sub(lambda m: change(m.group(0)), span)


def _at_least_one(
    chars: str, can: Callable[[str], bool], rng: random.Random, p: float
) -> list[bool]:
    """Which positions to change: each eligible one with probability ``p``, at least one."""
    eligible = [i for i, c in enumerate(chars) if can(c)]
    chosen = [i in eligible and rng.random() < p for i in range(len(chars))]
    if eligible and not any(chosen):
        chosen[rng.choice(eligible)] = True
    return chosen


# -- English spans -----------------------------------------------------------------------------


def _leet(span: str, rng: random.Random) -> str:
    def word(w: str) -> str:
        pick = _at_least_one(w, lambda c: c.lower() in _LEET, rng, 0.6)
        return "".join(
            rng.choice(_LEET[c.lower()]) if p else c for c, p in zip(w, pick, strict=True)
        )

    return _words(span, word)


def _mask(span: str, rng: random.Random) -> str:
    every_inner = rng.random() < 0.3

    def word(w: str) -> str:
        if len(w) < 3:
            return w
        inner = range(1, len(w) - 1)
        hidden = [i for i in inner if w[i].lower() in "aeiouy"] if not every_inner else list(inner)
        if not hidden:
            hidden = [rng.choice(list(inner))]
        return "".join("*" if i in hidden else c for i, c in enumerate(w))

    return _words(span, word)


def _split_with(sep: str) -> Callable[[str], str]:
    return lambda w: sep.join(w)


def _split_space(span: str, rng: random.Random) -> str:
    del rng
    # Three spaces between words, so that a reader still sees where a word ends.
    return "   ".join(_words(part, _split_with(" ")) for part in span.split(" "))


def _split_symbol(span: str, rng: random.Random) -> str:
    return _words(span, _split_with(rng.choice(SPLIT_SYMBOLS)))


def _split_emoji(span: str, rng: random.Random) -> str:
    return _words(span, _split_with(rng.choice(SPLIT_EMOJI)))


def _homoglyph(span: str, rng: random.Random) -> str:
    def word(w: str) -> str:
        pick = _at_least_one(w, lambda c: c in _HOMOGLYPHS, rng, 0.5)
        return "".join(rng.choice(_HOMOGLYPHS[c]) if p else c for c, p in zip(w, pick, strict=True))

    return _words(span, word)


@cache
def _math_alphabet(style: str) -> dict[str, str]:
    """ASCII letter -> that mathematical style's letter, where Unicode has one."""
    table: dict[str, str] = {}
    for letter in "abcdefghijklmnopqrstuvwxyz":
        for case, char in (("SMALL", letter), ("CAPITAL", letter.upper())):
            try:
                table[char] = unicodedata.lookup(f"{style} {case} {letter.upper()}")
            except KeyError:
                continue  # a few letters live elsewhere (e.g. the Planck constant): keep ASCII
    return table


def _math_letters(span: str, rng: random.Random) -> str:
    table = _math_alphabet(rng.choice(_MATH_STYLES))
    return _words(span, lambda w: "".join(table.get(c, c) for c in w))


def _zero_width(span: str, rng: random.Random) -> str:
    """A zero-width character after some letters of each word (at least one per word)."""

    def run(w: str) -> str:
        if len(w) < 2:
            return w
        pick = _at_least_one(w[:-1], lambda c: True, rng, 0.5)
        return (
            "".join(
                c + (rng.choice(ZERO_WIDTH) if p else "") for c, p in zip(w[:-1], pick, strict=True)
            )
            + w[-1]
        )

    return run(span) if _HAN.fullmatch(span) else _words(span, run)


def _fullwidth(span: str, rng: random.Random) -> str:
    del rng
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in span)


def _alternating_case(span: str, rng: random.Random) -> str:
    upper = rng.random() < 0.5
    out: list[str] = []
    for c in span:
        if c.isalpha():
            out.append(c.upper() if upper else c.lower())
            upper = not upper
        else:
            out.append(c)
    return "".join(out)


_EN_SPANS: dict[str, Span] = {
    "leet": _leet,
    "mask": _mask,
    "split_space": _split_space,
    "split_symbol": _split_symbol,
    "split_emoji": _split_emoji,
    "homoglyph": _homoglyph,
    "math_letters": _math_letters,
    "zero_width": _zero_width,
    "fullwidth": _fullwidth,
    "alternating_case": _alternating_case,
}


# -- Chinese spans -----------------------------------------------------------------------------


def _zh_split_space(span: str, rng: random.Random) -> str:
    del rng
    return _han(span, _split_with(" "))


def _zh_split_symbol(span: str, rng: random.Random) -> str:
    return _han(span, _split_with(rng.choice(SPLIT_SYMBOLS)))


def _zh_mask(span: str, rng: random.Random) -> str:
    def run(h: str) -> str:
        if len(h) < 2:
            return h  # a lone masked character is unreadable even to the person it targets
        i = rng.randrange(len(h))
        return h[:i] + rng.choice(ZH_MASKS) + h[i + 1 :]

    return _han(span, run)


def _zh_zero_width(span: str, rng: random.Random) -> str:
    return _han(span, lambda h: _zero_width(h, rng))


def _pinyin(span: str, rng: random.Random) -> str:
    joiner = rng.choice(("", " "))
    return _han(span, lambda h: joiner.join(lazy_pinyin(h, style=Style.NORMAL)))


def _pinyin_initials(span: str, rng: random.Random) -> str:
    upper = rng.random() < 0.4
    initials = _han(span, lambda h: "".join(lazy_pinyin(h, style=Style.FIRST_LETTER)))
    return initials.upper() if upper else initials


def _homophone(span: str, rng: random.Random) -> str:
    def run(h: str) -> str:
        readings = toneless(h)
        swaps = [pick_homophone(c, r, rng) or c for c, r in zip(h, readings, strict=True)]
        marks = "".join("y" if s != c else "n" for c, s in zip(h, swaps, strict=True))
        pick = _at_least_one(marks, lambda m: m == "y", rng, 0.7)
        return "".join(s if p else c for c, s, p in zip(h, swaps, pick, strict=True))

    return _han(span, run)


_ZH_SPANS: dict[str, Span] = {
    "split_space": _zh_split_space,
    "split_symbol": _zh_split_symbol,
    "mask": _zh_mask,
    "zero_width": _zh_zero_width,
    "pinyin": _pinyin,
    "pinyin_initials": _pinyin_initials,
    "homophone": _homophone,
}


# -- whole-line transforms ---------------------------------------------------------------------


@cache
def _opencc_s2t() -> Any:
    import opencc

    return opencc.OpenCC("s2t")


def _emoji_words(text: str, table: dict[str, str], lang: str) -> str:
    keys = sorted(table, key=lambda k: (-len(k), k))
    alternatives = "|".join(re.escape(k) for k in keys)
    if lang == "en":
        pattern = re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE)
        return pattern.sub(lambda m: table[m.group(0).lower()], text)
    return re.sub(alternatives, lambda m: table[m.group(0)], text)
