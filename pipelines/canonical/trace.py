"""The canonical text with its offset maps: ``trace(text) -> TracedText``.

``canonicalize`` is what every message goes through; ``trace`` is what a message whose rules
matched goes through once more, to say *where* they matched: the same ``CanonicalText`` and, for
the base text and for each reading matchers search, an ``OffsetMap`` back to the raw text. The
maps come from the stages themselves (``canonical_form`` tells a recorder each step that changed
the text; ``pipelines.canonical.offsets.align`` lines each step's input up with its output), so
a stage added to the canonicaliser is traced without a line here.

Readings and their maps:

* ``links`` (defanged links restored): aligned with the base text;
* each ``leet`` reading: a reading of the base text is the base text with tokens read letter
  for letter (same length, same positions); a stretched reading (``kiiiill``) is traced from the
  raw text through ``unstretched`` and the same stages;
* each ``masks`` token: the raw range of the token it was read from;
* ``pinyin.codes``: each code's Han character or Latin word.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.canonical.leet import leet_readings
from pipelines.canonical.offsets import OffsetError, OffsetMap, Span, align
from pipelines.canonical.pinyin import pinyin_positions
from pipelines.canonical.stretch import unstretched
from pipelines.canonical.text import CanonicalText, canonical_form, canonicalize

__all__ = ["TracedText", "trace"]


@dataclass(frozen=True, slots=True, repr=False)
class TracedText:
    """A message's canonical text and readings, each with its map back to the raw text."""

    canonical: CanonicalText
    text_map: OffsetMap
    """``canonical.text`` -> raw."""
    links_map: OffsetMap
    """``canonical.links`` -> raw."""
    leet_maps: tuple[OffsetMap, ...]
    """One per ``canonical.leet`` reading -> raw."""
    mask_spans: tuple[Span, ...]
    """One raw range per ``canonical.masks`` token."""
    pinyin_map: OffsetMap
    """``canonical.pinyin.codes`` -> raw."""

    def __repr__(self) -> str:
        return f"TracedText({self.canonical!r})"


class _Tracker:
    """Composes the map of each step the canonicaliser reports."""

    __slots__ = ("mapping",)

    def __init__(self, start: OffsetMap) -> None:
        self.mapping = start

    def __call__(self, before: str, after: str) -> None:
        self.mapping = self.mapping.through(align(before, after))


def _traced_form(text: str, start: OffsetMap) -> tuple[str, OffsetMap]:
    tracker = _Tracker(start)
    form = canonical_form(text, tracker)
    return form, tracker.mapping


def _subset(mapping: OffsetMap, spans: tuple[Span, ...]) -> OffsetMap:
    return mapping.through(spans) if spans else OffsetMap((), (), mapping.raw_length)


def trace(text: str, canonical: CanonicalText | None = None) -> TracedText:
    """``canonicalize(text)`` with the offset maps of its text and readings (module docs).

    ``canonical`` is ``canonicalize(text)`` when the caller has it already; one of another text
    is an ``OffsetError``.
    """
    raw = OffsetMap.identity(len(text))
    base, base_map = _traced_form(text, raw)
    if canonical is None:
        canonical = canonicalize(text)
    elif canonical.text != base:
        raise OffsetError("the canonical text given is not this text's")
    # Every reading that a matcher searches, with its map; the stretched ones come from the raw
    # text by another path, so the readings are found by their text, as canonicalize built them.
    readings: dict[str, OffsetMap] = {}
    own = leet_readings(base)
    for reading in own.texts:
        readings.setdefault(reading, base_map)  # read letter for letter: same positions
    stretched = unstretched(text)
    if stretched is not None:
        once, once_map = _traced_form(stretched, raw.through(align(text, stretched)))
        readings.setdefault(once, once_map)
        for reading in leet_readings(once).texts:
            readings.setdefault(reading, once_map)
    positions = pinyin_positions(base)
    if len(positions) != len(canonical.pinyin.codes):
        positions = ()  # cannot line the codes up: no pinyin spans rather than wrong ones
    links = canonical.links
    links_map = base_map if links == base else base_map.through(align(base, links))
    nowhere = OffsetMap((), (), len(text))  # a reading not traced: matchers skip it
    return TracedText(
        canonical=canonical,
        text_map=base_map,
        links_map=links_map,
        leet_maps=tuple(readings.get(reading, nowhere) for reading in canonical.leet),
        mask_spans=tuple(base_map.raw_span(start, end) for start, end in own.mask_spans),
        pinyin_map=_subset(base_map, positions),
    )
