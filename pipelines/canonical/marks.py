"""Combining-mark stripping on Latin letters: ``fück``, ``f̶u̶c̶k̶`` and Zalgo text read ``fuck``.

Marks are removed only when they sit on a Latin letter, so the vowel signs of scripts that need
them (Devanagari, Thai, ...) survive. The result is NFC-composed again.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["strip_marks"]

_LATIN = "A-Za-z\u00c0-\u024f\u0250-\u02af\u1e00-\u1eff"
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_ANY_MARK = re.compile(f"[{_MARKS}]")
_LATIN_MARKS = re.compile(f"([{_LATIN}])[{_MARKS}]+")


def strip_marks(text: str) -> str:
    """``text`` without the combining marks attached to Latin letters."""
    if text.isascii():
        return text
    if unicodedata.is_normalized("NFD", text) and _ANY_MARK.search(text) is None:
        return text
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", _LATIN_MARKS.sub(r"\1", decomposed))
