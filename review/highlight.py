"""The message text cut into pieces, the pieces its rules matched marked: the console's
highlight.

Rule hits carry ``spans``, offsets into the raw text in Unicode code points (Python string
indices; ``pipelines.rule_hits``). ``highlight`` turns the text and the hits of its verdict into
``Piece`` values for the template, which escapes every piece: the offsets never build markup.
A verdict's ``model_spans`` (the words that moved the model's decision, with how much leaving
each out lowered the deciding probability; ``pipelines.attribution``) are marked the same way,
in a style of their own (``mark.model``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from pipelines.attribution import model_attribution_from_json
from pipelines.rule_hits import spans_from_json

__all__ = ["Piece", "highlight"]


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of the text; ``rules`` are the ids of the rules that matched it (empty: plain);
    ``model_drop`` how much leaving out the word it is part of lowered the model's deciding
    probability (``None``: not a word the model leaned on)."""

    text: str
    rules: tuple[str, ...] = ()
    model_drop: float | None = None


def highlight(
    text: str,
    rule_hits: Sequence[Mapping[str, Any]],
    model_spans: Mapping[str, Any] | None = None,
) -> list[Piece]:
    """``text`` in order, cut where a hit's or a model span starts or ends; spans past the end
    of ``text`` (a text cleared or changed since) are cut to it. A ``model_spans`` that is not
    offsets is a ``pipelines.attribution.AttributionError``."""
    marks: list[tuple[int, int, str]] = []
    for hit in rule_hits:
        for start, end in spans_from_json(hit.get("spans")):
            start, end = min(start, len(text)), min(end, len(text))
            if start < end:
                marks.append((start, end, str(hit.get("rule_id", ""))))
    words: list[tuple[int, int, float]] = []
    attribution = model_attribution_from_json(model_spans)
    for span in attribution.spans if attribution is not None else ():
        start, end = min(span.start, len(text)), min(span.end, len(text))
        if start < end:
            words.append((start, end, span.drop))
    bounds = [(s, e) for s, e, _ in marks] + [(s, e) for s, e, _ in words]
    cuts = sorted({0, len(text), *(s for s, _ in bounds), *(e for _, e in bounds)})
    pieces: list[Piece] = []
    for low, high in pairwise(cuts):
        rules = tuple(dict.fromkeys(r for s, e, r in marks if s <= low and high <= e))
        drops = [d for s, e, d in words if s <= low and high <= e]
        pieces.append(Piece(text[low:high], rules, max(drops) if drops else None))
    return pieces
