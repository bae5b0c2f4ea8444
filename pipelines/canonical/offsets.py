"""Where each character of a derived text came from in the raw message: the offset map.

Every canonical stage rewrites text (drops invisible characters, folds case, squeezes runs, joins
split letters, reads look-alikes and leetspeak). An ``OffsetMap`` holds, for each character of
the text a stage produced, the range of *raw* characters it came from, so that a match found in
the canonical text (or in one of its readings) can be shown on the text the sender wrote.

A stage's map is found by aligning its input with its output (``align``, in linear time):
characters are compared by a loose key (the NFKD base letter, case folding, the look-alike table,
Traditional to Simplified, emoji read as characters), so the common edits (deletions, case,
accents, full-width forms, squeezed runs) line up character by character; a piece that was
replaced by a piece of the same length maps character by character, and a piece replaced by one
of another length maps, every character of it, to the whole piece it replaced; a dropped mark
stays with its letter. Maps of successive stages are composed (``OffsetMap.through``), so no
stage has to know about offsets.

Offsets are Python string indices (Unicode code points), ``end`` exclusive.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

from pipelines.canonical.confusables import confusable_table
from pipelines.canonical.emoji_words import EMOJI_HAN
from pipelines.canonical.traditional import to_simplified
from pipelines.errors import PipelineError

__all__ = ["OffsetError", "OffsetMap", "Span", "align"]

_WINDOW = 8
"""How far (characters of either text) ``align`` looks for the texts to agree again."""
Span = tuple[int, int]
"""``(start, end)``: a half-open range of string indices."""


class OffsetError(PipelineError):
    """Offsets that do not fit the text they are said to be in (a span outside it, a canonical
    text of another text)."""


@dataclass(frozen=True, slots=True, repr=False)
class OffsetMap:
    """For each character of a derived text, the raw range ``[starts[i], ends[i])`` it came
    from. Holds offsets only, never text."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    raw_length: int

    def __repr__(self) -> str:
        return f"OffsetMap(<{len(self.starts)} chars from {self.raw_length}>)"

    def __len__(self) -> int:
        return len(self.starts)

    @classmethod
    def identity(cls, length: int) -> OffsetMap:
        """The map of a text onto itself."""
        return cls(tuple(range(length)), tuple(range(1, length + 1)), length)

    def raw_span(self, start: int, end: int) -> Span:
        """The raw range that the derived characters ``[start, end)`` came from: from the first
        raw character any of them came from to the last one."""
        if not 0 <= start < end <= len(self.starts):
            raise OffsetError(f"span [{start}, {end}) is not inside a text of {len(self)} chars")
        return min(self.starts[start:end]), max(self.ends[start:end])

    def raw_spans(self, text: str, spans: Iterable[Span]) -> Iterator[Span]:
        """``spans`` of ``text`` (the derived text this map is for) as raw spans; none when
        ``text`` is not as long as the map, i.e. not its text."""
        if len(text) != len(self.starts):
            return
        for start, end in spans:
            yield self.raw_span(start, end)

    def through(self, step: Sequence[Span]) -> OffsetMap:
        """The map of a text derived from this map's text, where ``step[i]`` is the range of
        this map's text that derived character ``i`` came from (what ``align`` returns)."""
        starts: list[int] = []
        ends: list[int] = []
        own_starts, own_ends = self.starts, self.ends
        for low, high in step:
            if high == low + 1:  # the common case: one character from one character
                starts.append(own_starts[low])
                ends.append(own_ends[low])
            else:
                start, end = self.raw_span(low, high)
                starts.append(start)
                ends.append(end)
        return OffsetMap(tuple(starts), tuple(ends), self.raw_length)


@cache
def _key(char: str) -> str:
    """What ``char`` is compared as when aligning: its first NFKD, case-folded character (the
    base letter of an accented one), read
    through the look-alike table (full-width A U+FF21, ``A`` and Cyrillic a U+0430 all compare
    as ``a``), a Traditional character as its Simplified form and a listed emoji as the
    character it stands for."""
    if char in EMOJI_HAN:
        return EMOJI_HAN[char]
    folded = unicodedata.normalize("NFKD", char.casefold())
    first = folded[:1] or char
    first = confusable_table().get(first, first)
    return to_simplified(first)[:1] or first


def _attaches(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (a combining mark, a variation
    selector)."""
    return unicodedata.category(char) in ("Mn", "Me") or "\ufe00" <= char <= "\ufe0f"


def _resync(left: list[str], right: list[str], i: int, j: int) -> tuple[int, int]:
    """How many characters of each text to take as one changed piece before they agree again:
    the cheapest piece within ``_WINDOW`` characters of either, where a character written
    counts twice a character dropped (stages mostly drop: separators, invisible characters,
    squeezed runs), agreeing on a character that is not a mark; one character each when there
    is none."""
    for cost in range(1, 3 * _WINDOW + 1):
        for produced in range(min(cost // 2, _WINDOW) + 1):
            skipped = cost - 2 * produced
            if skipped > _WINDOW:
                continue
            low, high = i + skipped, j + produced
            if (
                low < len(left)
                and high < len(right)
                and left[low] == right[high]
                and not _attaches(left[low])
            ):
                return skipped, produced
    return min(1, len(left) - i), min(1, len(right) - j)


def align(before: str, after: str) -> list[Span]:
    """For each character of ``after`` (a stage's output), the range of ``before`` (its input)
    it came from; never an empty range while ``before`` has characters.

    A two-pointer walk: characters whose keys agree map one to one; where they differ, the
    smallest changed piece after which they agree again (within a few characters) is one
    replacement, deletion or insertion. Linear in the length of the texts (a stage changes
    text locally), unlike a general diff.
    """
    if before == after:
        return [(index, index + 1) for index in range(len(after))]
    if not before:
        raise OffsetError("a stage produced text from nothing")
    left = [_key(char) for char in before]
    right = [_key(char) for char in after]
    spans: list[Span] = []
    i = j = 0
    while j < len(right):
        if i < len(left) and left[i] == right[j]:
            spans.append((i, i + 1))
            i += 1
            j += 1
            continue
        if i == len(left):
            # Text written after the end of the input: it belongs to the last character.
            spans.extend([(i - 1, i)] * (len(right) - j))
            break
        removed, produced = _resync(left, right, i, j)
        _piece(spans, before, i, i + removed, produced)
        i += removed
        j += produced
    if i < len(left) and spans and all(_attaches(char) for char in before[i:]):
        spans[-1] = (spans[-1][0], len(before))
    return spans


def _piece(spans: list[Span], before: str, low: int, high: int, produced: int) -> None:
    """Map ``produced`` new characters that replaced ``before[low:high]``."""
    if high - low == produced:
        spans.extend((low + offset, low + offset + 1) for offset in range(produced))
    elif produced and high > low:
        spans.extend([(low, high)] * produced)
    elif produced:
        # Text written where there was none (``+`` read as ``加`` lines up as a replacement;
        # this is the rare rest): it belongs to the character before it.
        anchor = low - 1 if low > 0 else 0
        spans.extend([(anchor, anchor + 1)] * produced)
    elif spans and all(_attaches(char) for char in before[low:high]):
        # Marks and variation selectors dropped from a letter stay part of it.
        spans[-1] = (spans[-1][0], max(spans[-1][1], high))
