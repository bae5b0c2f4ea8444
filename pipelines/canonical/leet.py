"""Leetspeak and symbol-mask readings of a text, for keyword matching only.

Only tokens that mix Latin letters with digits or symbols get a reading (``sh1t``, ``a$$``,
``f4gg0t``, ``b!tch``); a token of digits alone (``25``, ``$25``, ``13812345678``), a number
with a unit or ordinal (``8am``, ``6th``, ``5g``), a name with a serial number (``player123``)
and Chinese text with an exclamation mark (``生日快乐!祝你``) never do.
The readings are candidates: a rule matches only when a reading spells one of its keywords, so
``b4`` (``ba``), ``2nd`` and ``l33t`` produce readings that simply match nothing.

Digits read as letters: ``4`` a, ``8`` b, ``3`` e, ``6`` and ``9`` g, ``1`` i, ``0`` o, ``5`` s,
``7`` t; symbols: ``@`` a, ``!`` i, ``$`` s. ``1`` and ``!`` can stand for ``i`` or ``l``: the
first reading reads them as ``i``, a second one (only when such a character occurs) as ``l``.
``*`` masks one unknown letter (``f*ck``, ``sh*t``), and so does an emoji between letters
(``f🖕ck``, ``sh💩t``; one at either end of a word is decoration, not a mask); masked tokens
are returned separately for the matcher to fit against its lexicon with ``mask_fits``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LeetReadings", "leet_readings", "mask_fits"]

_LETTERS = {
    "4": "a",
    "@": "a",
    "8": "b",
    "3": "e",
    "6": "g",
    "9": "g",
    "1": "i",
    "!": "i",
    "0": "o",
    "5": "s",
    "$": "s",
    "7": "t",
}
_PRIMARY = str.maketrans(_LETTERS)
_ALTERNATE = str.maketrans({"1": "l", "!": "l"})
_AMBIGUOUS = frozenset("1!")
_EMOJI = "\u2600-\u27bf\U0001f000-\U0001faff"
_EMOJI_CHAR = re.compile(f"[{_EMOJI}]\ufe0f?")
_LEET_CHARS = frozenset([*_LETTERS, "*"])
_CLASS = re.escape("".join(sorted(_LEET_CHARS)))
_ANY_LEET = re.compile(f"[{_CLASS}{_EMOJI}]")
_LEET_TOKEN = re.compile(f"\\S*[{_CLASS}{_EMOJI}]\\S*")
_LEADING = re.compile(f"[\"'()\\[\\]{{}}<>,.;:?{_EMOJI}\ufe0f]*")
_TRAILING = re.compile(f"[\"'()\\[\\]{{}}<>,.;:?!{_EMOJI}\ufe0f]*$")
_MIN_VISIBLE = 2
_NUMBERED = re.compile(
    r"\d+(?:st|nd|rd|th|am|pm|k|g|gb|mb|kb|tb|d|h|hr|hrs|m|min|mins|s|x|p|fps|hz|w|mm|cm|km|kg"
    r"|lb|lbs|oz|ml)|[a-z_]+\d{3,}",
    re.ASCII,
)


@dataclass(frozen=True, slots=True)
class LeetReadings:
    """Alternative full texts with leet tokens read as letters, and the masked tokens."""

    texts: tuple[str, ...] = ()
    masks: tuple[str, ...] = ()
    mask_spans: tuple[tuple[int, int], ...] = ()
    """Where each of ``masks`` is in the text read, ``(start, end)``."""


_NONE = LeetReadings()


def _core(token: str) -> tuple[int, int]:
    """Start and end of ``token`` without surrounding punctuation and emoji (a trailing ``!``
    included)."""
    leading = _LEADING.match(token)
    start = leading.end() if leading else 0
    trailing = _TRAILING.search(token, start)
    end = trailing.start() if trailing else len(token)
    return start, max(start, end)


def _is_candidate(core: str) -> bool:
    """Whether ``core`` mixes Latin letters with leet characters and is not a number with a
    unit (``8am``, ``6th``, ``5g``) or a name with a serial number (``player123``)."""
    has_letter = has_leet = False
    for char in core:
        if char in _LEET_CHARS:
            has_leet = True
        elif char.isascii() and char.isalpha():
            has_letter = True
    return has_letter and has_leet and _NUMBERED.fullmatch(core) is None


def leet_readings(text: str) -> LeetReadings:
    """The leet readings of ``text`` (canonical text); empty when no token mixes letters and
    digits or symbols."""
    if _ANY_LEET.search(text) is None:
        return _NONE
    primary: list[str] = []
    alternate: list[str] = []
    masks: list[str] = []
    mask_spans: list[tuple[int, int]] = []
    ambiguous = changed = False
    last = 0
    for match in _LEET_TOKEN.finditer(text):
        token = match.group()
        start, end = _core(token)
        core = _EMOJI_CHAR.sub("*", token[start:end])
        if not _is_candidate(core):
            continue
        read = core.translate(_PRIMARY)
        if "*" in read:
            visible = sum(1 for char in read if char != "*")
            if visible >= _MIN_VISIBLE and read.count("*") <= visible:
                masks.append(read)
                mask_spans.append((match.start() + start, match.start() + end))
            continue
        offset = match.start() + start
        primary.append(text[last:offset])
        alternate.append(text[last:offset])
        primary.append(read)
        if _AMBIGUOUS.intersection(core):
            ambiguous = True
            alternate.append(core.translate(_ALTERNATE).translate(_PRIMARY))
        else:
            alternate.append(read)
        last = offset + len(core)
        changed = True
    texts: list[str] = []
    if changed:
        primary.append(text[last:])
        texts.append("".join(primary))
        if ambiguous:
            alternate.append(text[last:])
            texts.append("".join(alternate))
    if not texts and not masks:
        return _NONE
    return LeetReadings(texts=tuple(texts), masks=tuple(masks), mask_spans=tuple(mask_spans))


def mask_fits(mask: str, word: str) -> bool:
    """Whether ``word`` spells ``mask`` with each ``*`` standing for one letter."""
    if len(mask) != len(word):
        return False
    for masked, char in zip(mask, word, strict=True):
        if masked == "*":
            if not char.isalpha():
                return False
        elif masked != char:
            return False
    return True
