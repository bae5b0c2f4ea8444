"""Chinese homophones: common characters grouped by their toneless pinyin, from pypinyin's data.

Abusers swap a character for another that sounds the same once tones are dropped (the classic
swap of the second character of a two-character insult for a same-sounding everyday one). The
candidates here are derived, not typed: every character of pypinyin's single-character
dictionary that has exactly one reading and is in the first level of GB2312 (the 3,755 most
common characters, bytes ``0xB0..0xD7`` as the first byte), grouped by
``lazy_pinyin(char, style=Style.NORMAL)``. One reading only, so a candidate is never read
differently from what was meant; common only, so the result looks like something a person types.
"""

from __future__ import annotations

import random
from functools import cache

from pypinyin import Style, lazy_pinyin
from pypinyin.pinyin_dict import pinyin_dict

__all__ = ["homophone_groups", "homophones_of", "pick_homophone", "toneless"]

_GB2312_LEVEL1 = range(0xB0, 0xD8)


def _common(char: str) -> bool:
    try:
        encoded = char.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return len(encoded) == 2 and encoded[0] in _GB2312_LEVEL1


def toneless(han: str) -> list[str]:
    """The toneless pinyin of each character of ``han`` (Chinese characters only), read in
    context so that polyphones resolve (pypinyin's phrase dictionary)."""
    readings = lazy_pinyin(han, style=Style.NORMAL)
    if len(readings) != len(han):
        raise ValueError("toneless() takes Chinese characters only")
    return readings


@cache
def homophone_groups() -> dict[str, tuple[str, ...]]:
    """Toneless pinyin -> the common single-reading characters read that way, sorted."""
    groups: dict[str, list[str]] = {}
    for code, readings in sorted(pinyin_dict.items()):
        if "," in readings:
            continue
        char = chr(code)
        if not _common(char):
            continue
        key = lazy_pinyin(char, style=Style.NORMAL)[0]
        groups.setdefault(key, []).append(char)
    return {key: tuple(chars) for key, chars in sorted(groups.items())}


def homophones_of(char: str, reading: str) -> tuple[str, ...]:
    """Other common characters with the toneless ``reading`` of ``char``."""
    return tuple(c for c in homophone_groups().get(reading, ()) if c != char)


def pick_homophone(char: str, reading: str, rng: random.Random) -> str | None:
    """A random homophone of ``char`` read as ``reading``, or ``None`` when there is none."""
    options = homophones_of(char, reading)
    return rng.choice(options) if options else None
