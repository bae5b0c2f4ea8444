"""Text normalisation: the first stage of the canonical text (``pipelines.canonical``).

``normalize`` maps visually or typographically equivalent spellings onto one form so that a
keyword list written once matches the many ways people type it:

1. control, format and surrogate code points are dropped (zero-width spaces and joiners
   U+200B..U+200D, word joiner U+2060, BOM U+FEFF, bidi embeddings and overrides U+202A..U+202E
   and isolates U+2066..U+2069, soft hyphen, tag characters, C0/C1 controls); whitespace controls
   (tab, newline, ...) become a space;
2. Unicode NFKC (full-width forms become ASCII, so full-width ``FREE``, U+FF26 U+FF32 U+FF25
   U+FF25, becomes ``FREE``; ligatures and compatibility characters are expanded), then full
   case folding (``"ß"`` becomes ``"ss"``);
3. typographic quotes become ASCII quotes (U+2019 is ``'``);
4. runs of more than two identical characters other than digits are squeezed to two
   (``"fuuuuck"`` is ``"fuuck"``, ``"www."`` is ``"ww."``, but ``"13888888888"`` is kept so that
   phone numbers and ids survive);
5. runs of whitespace become one space and the ends are stripped.

The steps are repeated until the text no longer changes (in practice at most twice), which makes
the function idempotent: ``normalize(normalize(x)) == normalize(x)`` for every string.
"""

from __future__ import annotations

import re
import sys
import unicodedata

__all__ = ["normalize"]

_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})


def _dropped_class() -> str:
    """A regex character class of every control, format and surrogate code point.

    Whitespace controls (tab, newline, ...) are kept here: the final whitespace collapse turns
    them into single spaces.
    """
    spans: list[tuple[int, int]] = []
    # Every Cc/Cf/Cs code point of this Unicode version lies in planes 0, 1 or 14.
    ranges = (range(0, 0x20000), range(0xE0000, min(0xE1000, sys.maxunicode + 1)))
    for block in ranges:
        for code in block:
            char = chr(code)
            if unicodedata.category(char) in _DROPPED_CATEGORIES and not char.isspace():
                if spans and spans[-1][1] == code - 1:
                    spans[-1] = (spans[-1][0], code)
                else:
                    spans.append((code, code))
    parts = (
        f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}" for low, high in spans
    )
    return "[" + "".join(parts) + "]"


_DROPPED = re.compile(_dropped_class())
_SINGLE_QUOTES = re.compile("[\u2018\u2019\u201a\u201b\u2032\uff07]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d\u201e\u201f\u2033\uff02]")
_REPEATS = re.compile(r"(\D)\1{2,}", re.DOTALL)  # digits are kept: numbers are data
_MAX_PASSES = 8


def _strip_invisible(text: str) -> str:
    if not text.isprintable():  # fast C check; false for every dropped character
        text = _DROPPED.sub("", text)
    text = _SINGLE_QUOTES.sub("'", text)
    return _DOUBLE_QUOTES.sub('"', text)


def _one_pass(text: str) -> str:
    text = _strip_invisible(text)
    if not unicodedata.is_normalized("NFKC", text):
        text = _strip_invisible(unicodedata.normalize("NFKC", text))
    folded = text.casefold()
    if folded != text and not unicodedata.is_normalized("NFKC", folded):
        folded = _strip_invisible(unicodedata.normalize("NFKC", folded))
    text = _REPEATS.sub(r"\1\1", folded)
    return " ".join(text.split())


def _ascii_pass(text: str) -> str:
    # For ASCII, NFKC is the identity and case folding is lower(); one pass is a fixed point.
    if not text.isprintable():
        text = _DROPPED.sub("", text)
    text = text.lower()
    text = _REPEATS.sub(r"\1\1", text)
    return " ".join(text.split())


def _is_fixed_point(text: str) -> bool:
    """Whether ``_one_pass(text) == text``, for an output of ``_one_pass``, without a pass.

    A pass leaves no dropped character, typographic quote, run of three or whitespace run
    behind, and squeezing or collapsing cannot create one; what it can leave is text that is not
    NFKC-normalised or not case-folded (removing characters can expose a composable pair).
    """
    return unicodedata.is_normalized("NFKC", text) and text.casefold() == text


def normalize(text: str) -> str:
    """Return the canonical form of ``text`` that rules and keyword lists are matched against."""
    if text.isascii():
        return _ascii_pass(text)
    current = _one_pass(text)
    for _ in range(_MAX_PASSES):
        if _is_fixed_point(current):
            return current
        following = _one_pass(current)
        if following == current:
            return current
        current = following
    return current
