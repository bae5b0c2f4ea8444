"""What a rescan is, as the command, the rescanner, the store and the history reader share it.

The types here carry no behaviour: an offset range of one partition and a record read back
(``worker.history``), what ``modstream rescan`` was asked (:class:`RescanRequest`), the plan
the store keeps (:class:`RescanPlan`: the request, its id and what is left to read), the stored
decision a new one is compared with, and the two ways a rescan ends early. They live apart from
the parts that act on them so the command line and the stores can name them without importing
those parts (the import contract "Moderation parts are wired in the builders alone").
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from worker.errors import WorkerError
from worker.rescan_review import ReviewState

__all__ = [
    "HistoryRecord",
    "OffsetRange",
    "RescanNotFound",
    "RescanPlan",
    "RescanRequest",
    "RescanStopped",
    "StoredDecision",
]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``start`` (included) to ``end`` (excluded) of one partition."""

    partition: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """One record read back: where it is and its bytes."""

    partition: int
    offset: int
    value: bytes | None


class RescanNotFound(WorkerError, LookupError):
    """``--resume`` names a rescan that does not exist."""


class RescanStopped(WorkerError, RuntimeError):
    """The rescan stopped before its end (the model stayed away); it can be resumed."""

    def __init__(self, rescan_id: uuid.UUID, why: str) -> None:
        super().__init__(f"rescan {rescan_id} stopped: {why}; resume with --resume {rescan_id}")
        self.rescan_id = rescan_id


@dataclass(frozen=True, slots=True)
class RescanRequest:
    """What ``modstream rescan`` was asked."""

    topic: str
    since: datetime
    until: datetime
    group_id: str | None
    model_name: str
    model_version: str
    apply: bool


@dataclass(frozen=True, slots=True)
class RescanPlan:
    """What a rescan was asked to do, and (once loaded) how far it got."""

    rescan_id: uuid.UUID
    topic: str
    group_id: str | None
    since: datetime
    until: datetime
    model_name: str
    model_version: str
    apply: bool
    ranges: tuple[OffsetRange, ...]
    """Per partition, what is left to read: from the next offset to the window's end."""
    report: Mapping[str, Any]
    finished: bool = False


@dataclass(frozen=True, slots=True)
class StoredDecision:
    """What the stored verdict of a message says now (to compare a new decision with)."""

    decision: str
    escalated: bool
    category: str | None
    message_id: str
    review: ReviewState = ReviewState.NONE
    """Where its review item stands as read (an applied batch reads it again, locked)."""
