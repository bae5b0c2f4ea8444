"""A person's decision stands: what a rescan may do with a verdict and its review item.

Where a verdict's review item stands decides what an applied rescan does (``worker.rescan``,
``worker.rescan_store``; the state is read, and the item locked, by PostgreSQL's
``modstream_review_item_states``):

* **held**: a moderator resolved the item, holds a live claim on it, or sent it to the admins.
  The verdict stays as it is; what the rescan would now decide is recorded beside it (the
  ``rescan_*`` columns) and counted, and the item is left alone.
* **waiting** (open, or its claim expired), **closed** (a rescan withdrew it) or **none** (no
  item): nobody decided, so the verdict is updated in place (changed or not) and the item follows
  the new verdict: a waiting item of a verdict no longer escalated is closed, a closed one
  escalated again is reopened, and a new escalation opens an item.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict

__all__ = ["AppliedBatch", "ItemAction", "Redecided", "ReviewState", "item_action"]


class ReviewState(StrEnum):
    """Where a verdict's review item stands (the values ``modstream_review_item_states`` gives,
    and ``none`` for a verdict without an item)."""

    NONE = "none"
    WAITING = "waiting"
    CLOSED = "closed"
    HELD = "held"

    @property
    def stands(self) -> bool:
        """Whether a person has the verdict: a rescan must not change it."""
        return self is ReviewState.HELD


class ItemAction(StrEnum):
    """What an applied rescan does to a verdict's review item."""

    LEAVE = "leave"
    OPEN = "open"
    REOPEN = "reopen"
    CLOSE = "close"


def item_action(state: ReviewState, escalate: bool) -> ItemAction:
    """The review item's fate when a verdict whose item is in ``state`` is decided again with
    ``escalate``: a held item is never touched."""
    if state is ReviewState.HELD:
        return ItemAction.LEAVE
    if escalate:
        return {
            ReviewState.NONE: ItemAction.OPEN,
            ReviewState.CLOSED: ItemAction.REOPEN,
        }.get(state, ItemAction.LEAVE)
    return ItemAction.CLOSE if state is ReviewState.WAITING else ItemAction.LEAVE


@dataclass(frozen=True, slots=True)
class Redecided:
    """A stored verdict decided again by a rescan: the new verdict, whether its decision or
    escalation differs from the stored one, and the text a new review item must show."""

    verdict: Verdict
    changed: bool
    message_text: str


@dataclass(frozen=True, slots=True)
class AppliedBatch:
    """What one applied batch wrote (nothing for a dry run)."""

    updated: frozenset[SourcePosition] = frozenset()
    """Verdicts whose decision changed and were updated: to publish."""
    stamped: int = 0
    """Verdicts updated in place with the rescan's model and id, changed or not."""
    kept: int = 0
    """Verdicts a person has, left as they are with the would-be verdict beside them."""
    kept_differs: int = 0
    """Of ``kept``, those the rescan would decide differently."""
    closed: int = 0
    opened: int = 0
    """Review items opened for new escalations, or reopened."""
