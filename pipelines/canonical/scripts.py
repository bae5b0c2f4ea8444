"""Character classes the canonical stages share: Han ideographs, Latin letters, separators."""

from __future__ import annotations

import re

__all__ = ["HAN_CLASS", "SEPARATOR_CLASS", "has_han", "is_han", "is_latin_letter"]

HAN_CLASS = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
"""A regex character class of the CJK unified and compatibility ideographs."""

SEPARATOR_CLASS = (
    "[\\s.\\-_~+/|\u00b7\u2022\u2027\u30fb\u2010-\u2015"
    "\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f]"
)
"""What people put between the letters of a word to hide it from filters: spaces, dots, dashes,
underscores, slashes, bars, middle dots, emoji and pictographic symbols. Commas, colons and
sentence punctuation are not separators: they separate real words."""

_HAN = re.compile(HAN_CLASS)


def has_han(text: str) -> bool:
    """Whether ``text`` contains at least one Han ideograph."""
    return not text.isascii() and _HAN.search(text) is not None


def is_han(char: str) -> bool:
    """Whether the single character ``char`` is a Han ideograph."""
    return _HAN.fullmatch(char) is not None


def is_latin_letter(char: str) -> bool:
    """Whether ``char`` is a letter of the Latin script (ASCII or accented, IPA included)."""
    code = ord(char)
    return char.isalpha() and (
        code < 0x80 or 0xC0 <= code <= 0x24F or 0x250 <= code <= 0x2AF or 0x1E00 <= code <= 0x1EFF
    )
