"""Column arrays for the stores' ``unnest`` statements: one array per column, one entry per row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VERDICT_COLUMNS, verdict_row

__all__ = ["position_arrays", "verdict_arrays"]


def position_arrays(
    positions: Iterable[SourcePosition],
) -> tuple[list[str], list[int], list[int]]:
    """Topic, partition and offset arrays."""
    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    for p in positions:
        topics.append(p.topic)
        partitions.append(p.partition)
        offsets.append(p.offset)
    return topics, partitions, offsets


def verdict_arrays(verdicts: Sequence[Verdict]) -> list[list[Any]]:
    """One array per ``VERDICT_COLUMNS`` entry, in that order (``verdict_row`` transposed)."""
    cols: list[list[Any]] = [[] for _ in VERDICT_COLUMNS]
    for v in verdicts:
        for col, value in zip(cols, verdict_row(v), strict=True):
            col.append(value)
    return cols
