"""Where each character of a derived text came from in the raw message: the offset map.

Every canonical stage rewrites text (drops invisible characters, folds case, squeezes runs, joins
split letters, reads look-alikes and leetspeak). An ``OffsetMap`` holds, for each character of
the text a stage produced, the range of *raw* characters it came from, so that a match found in
the canonical text (or in one of its readings) can be shown on the text the sender wrote.

A stage's map is found by aligning its input with its output (``align``): characters are
compared by a loose key (NFKC, case folding, the look-alike table), so the common edits
(deletions, case, full-width forms, squeezed runs) line up character by character; a piece that
was replaced by a piece of the same length maps character by character, and a piece replaced by
one of another length maps, every character of it, to the whole piece it replaced. Maps of
successive stages are composed (``OffsetMap.through``), so no stage has to know about offsets.

Offsets are Python string indices (Unicode code points), ``end`` exclusive.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache

from pipelines.canonical.confusables import confusable_table
from pipelines.errors import PipelineError

__all__ = ["OffsetError", "OffsetMap", "Span", "align"]

Span = tuple[int, int]
"""``(start, end)``: a half-open range of string indices."""


class OffsetError(PipelineError):
    """A span that does not lie inside the text it is said to be in."""


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
        for low, high in step:
            start, end = self.raw_span(low, high)
            starts.append(start)
            ends.append(end)
        return OffsetMap(tuple(starts), tuple(ends), self.raw_length)


@cache
def _key(char: str) -> str:
    """What ``char`` is compared as when aligning: its first NFKC, case-folded character, read
    through the look-alike table (full-width A U+FF21, ``A`` and Cyrillic a U+0430 all compare
    as ``a``)."""
    folded = unicodedata.normalize("NFKC", char).casefold()
    first = folded[:1] or char
    return confusable_table().get(first, first)


def _attaches(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (a combining mark, a variation
    selector)."""
    return unicodedata.category(char) in ("Mn", "Me") or "\ufe00" <= char <= "\ufe0f"


def align(before: str, after: str) -> list[Span]:
    """For each character of ``after`` (a stage's output), the range of ``before`` (its input)
    it came from; never an empty range while ``before`` has characters."""
    if before == after:
        return [(index, index + 1) for index in range(len(after))]
    if not before:
        raise OffsetError("a stage produced text from nothing")
    left = [_key(char) for char in before]
    right = [_key(char) for char in after]
    # Most stages change a few characters: only the middle that differs is diffed.
    prefix = 0
    limit = min(len(left), len(right))
    while prefix < limit and left[prefix] == right[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and left[-1 - suffix] == right[-1 - suffix]:
        suffix += 1
    spans: list[Span] = [(index, index + 1) for index in range(prefix)]
    matcher = SequenceMatcher(
        None, left[prefix : len(left) - suffix], right[prefix : len(right) - suffix], False
    )
    for tag, low, high, out_low, out_high in matcher.get_opcodes():
        low += prefix
        high += prefix
        produced = out_high - out_low
        if tag in ("equal", "replace") and high - low == produced:
            spans.extend((low + offset, low + offset + 1) for offset in range(produced))
        elif tag == "replace":
            spans.extend([(low, high)] * produced)
        elif tag == "insert":
            # Text written where there was none (``+`` read as ``加`` lines up as a replacement;
            # this is the rare rest): it belongs to the character before it.
            anchor = low - 1 if low > 0 else 0
            spans.extend([(anchor, anchor + 1)] * produced)
        elif tag == "delete" and spans and all(_attaches(char) for char in before[low:high]):
            # Marks and variation selectors dropped from a letter stay part of it.
            spans[-1] = (spans[-1][0], max(spans[-1][1], high))
    tail = len(before) - suffix
    spans.extend((tail + offset, tail + offset + 1) for offset in range(suffix))
    return spans
