"""The message text cut into pieces, the pieces its rules matched marked: the console's
highlight.

Rule hits carry ``spans``, offsets into the raw text in Unicode code points (Python string
indices; ``pipelines.rule_hits``). ``highlight`` turns the text and the hits of its verdict into
``Piece`` values for the template, which escapes every piece: the offsets never build markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from pipelines.rule_hits import spans_from_json

__all__ = ["Piece", "highlight"]


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of the text; ``rules`` are the ids of the rules that matched it (empty: plain)."""

    text: str
    rules: tuple[str, ...] = ()


def highlight(text: str, rule_hits: Sequence[Mapping[str, Any]]) -> list[Piece]:
    """``text`` in order, cut where a hit's span starts or ends; spans past the end of ``text``
    (a text cleared or changed since) are cut to it."""
    marks: list[tuple[int, int, str]] = []
    for hit in rule_hits:
        for start, end in spans_from_json(hit.get("spans")):
            start, end = min(start, len(text)), min(end, len(text))
            if start < end:
                marks.append((start, end, str(hit.get("rule_id", ""))))
    cuts = sorted({0, len(text), *(s for s, _, _ in marks), *(e for _, e, _ in marks)})
    pieces: list[Piece] = []
    for low, high in pairwise(cuts):
        rules = tuple(dict.fromkeys(r for s, e, r in marks if s <= low and high <= e))
        pieces.append(Piece(text[low:high], rules))
    return pieces
