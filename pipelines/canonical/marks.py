"""Combining-mark stripping on Latin letters: ``fück``, ``f̶u̶c̶k̶`` and Zalgo text read ``fuck``.

Marks are removed only when they sit on a Latin letter, so the vowel signs of scripts that need
them (Devanagari, Thai, ...) survive. The result is NFC-composed again.
"""

from __future__ import annotations

import unicodedata

from pipelines.canonical.scripts import is_latin_letter

__all__ = ["strip_marks"]


def strip_marks(text: str) -> str:
    """``text`` without the combining marks attached to Latin letters."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFD", text)
    kept: list[str] = []
    base_is_latin = False
    for char in decomposed:
        if unicodedata.combining(char) or unicodedata.category(char) == "Mn":
            if base_is_latin:
                continue
        else:
            base_is_latin = is_latin_letter(char)
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))
