"""The entry point: ``canonicalize(text) -> CanonicalText``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.canonical.confusables import fold_confusables
from pipelines.canonical.emoji_words import read_emoji_words
from pipelines.canonical.leet import leet_readings
from pipelines.canonical.links import deobfuscate_links
from pipelines.canonical.marks import strip_marks
from pipelines.canonical.pinyin import NO_PINYIN, PinyinReading, pinyin_reading
from pipelines.canonical.rejoin import rejoin
from pipelines.canonical.stretch import unstretched
from pipelines.canonical.traditional import to_simplified
from pipelines.normalize import normalize

__all__ = ["CanonicalText", "Recorder", "canonical_form", "canonicalize"]

_MAX_PASSES = 4


@dataclass(frozen=True, slots=True, repr=False)
class CanonicalText:
    """One message in canonical form. Never log it: it is the message text (its ``repr`` shows
    only sizes)."""

    text: str
    """The base canonical text: what keyword rules match, what regex rules search (via
    ``links``), and what the models should score."""
    links: str
    """``text`` with defanged links restored (``hxxp``, ``[.]``, ``dot com``); the same string
    as ``text`` when there were none. Regex and link rules search this."""
    leet: tuple[str, ...] = ()
    """Alternative readings of ``text`` (matching only): leetspeak tokens read as letters, and
    letters stretched past two read once (``kiiiill`` -> ``kill``)."""
    masks: tuple[str, ...] = ()
    """Tokens with ``*`` masks (``f*ck``), leet already read, for fitting against a lexicon."""
    pinyin: PinyinReading = NO_PINYIN
    """Pinyin syllables of the Han text, for homophones (matching only)."""

    def __repr__(self) -> str:
        return (
            f"CanonicalText(<{len(self.text)} chars>, leet={len(self.leet)},"
            f" masks={len(self.masks)}, syllables={len(self.pinyin.codes)})"
        )


Step = Callable[[str], str]
Recorder = Callable[[str, str], None]
"""Told ``(before, after)`` for every step that changed the text (``pipelines.canonical.trace``
builds the offset map from them)."""

_NON_ASCII_STEPS: tuple[Step, ...] = (
    strip_marks,
    fold_confusables,
    to_simplified,
    read_emoji_words,
)


def _stages(text: str, record: Recorder | None) -> str:
    """Steps 2-6 on normalised text."""
    if not text.isascii():
        for step in _NON_ASCII_STEPS:
            text = _run(step, text, record)
    return _run(rejoin, text, record)


def _run(step: Step, text: str, record: Recorder | None) -> str:
    after = step(text)
    if record is not None and after != text:
        record(text, after)
    return after


def canonical_form(text: str, record: Recorder | None = None) -> str:
    """The base canonical text of ``text`` alone (``canonicalize(text).text``), without the
    readings: what keyword lists are canonicalised with. ``record``, when given, is told every
    step that changed the text."""
    current = _run(normalize, text, record)
    for _ in range(_MAX_PASSES):
        staged = _stages(current, record)
        if staged == current:
            return current  # normalised, and no stage changes it: a fixed point
        current = _run(normalize, staged, record)
    return current


def canonicalize(text: str) -> CanonicalText:
    """The canonical text of ``text`` and the readings matchers use (see the package docs)."""
    base = canonical_form(text)
    readings = leet_readings(base)
    alternatives = readings.texts
    stretched = unstretched(text)
    if stretched is not None:
        once = canonical_form(stretched)
        if once != base:
            extra = (once, *leet_readings(once).texts)
            alternatives += tuple(r for r in extra if r not in alternatives)
    return CanonicalText(
        text=base,
        links=deobfuscate_links(base),
        leet=alternatives,
        masks=readings.masks,
        pinyin=pinyin_reading(base),
    )
