"""Reading appeals back: one query and one shape for every reader of the ``appeals`` table.

Shared by the filing desk (``review.appeals``), the outcomes (``review.appeal_outcomes``) and the
item view (``review.queue``), so an appeal reads the same wherever it is shown.
"""

from __future__ import annotations

from typing import Any

from review.schemas import AppealSource, AppealStatus, AppealView

__all__ = ["SELECT_APPEAL", "appeal_view", "optional_text"]

SELECT_APPEAL = """
SELECT a.*, i.public_id::text AS item_public_id, o.public_id::text AS original_public_id
FROM appeals a
JOIN review_items i ON i.id = a.review_item_id
LEFT JOIN review_items o ON o.id = a.original_item_id
"""
"""Every column of an appeal with its item's and the appealed item's public ids; callers add
their ``WHERE`` clause (a constant, values bound)."""


def appeal_view(row: Any) -> AppealView:
    """An :class:`AppealView` from a row of :data:`SELECT_APPEAL`."""
    return AppealView(
        appeal_id=str(row["public_id"]),
        appeal_key=row["appeal_key"],
        item_id=row["item_public_id"],
        channel=row["channel"],
        filed_by=row["filed_by"],
        appellant_id=row["appellant_id"],
        message_id=row["message_id"],
        group_id=row["group_id"],
        sender_id=row["sender_id"],
        category=row["category"],
        source=AppealSource(
            topic=row["source_topic"],
            partition=row["source_partition"],
            offset=row["source_offset"],
        ),
        original_decision=row["original_decision"],
        original_decided_by=row["original_decided_by"],
        original_moderator=row["original_moderator"],
        original_decision_id=optional_text(row["original_decision_id"]),
        status=AppealStatus(row["status"]),
        outcome_reason=row["outcome_reason"],
        decided_by=row["decided_by"],
        decided_at=row["decided_at"],
        correction_id=optional_text(row["correction_id"]),
        strikes_lifted=row["strikes_lifted"],
        filed_at=row["filed_at"],
        due_at=row["due_at"],
    )


def optional_text(value: Any) -> str | None:
    """``str(value)``, or ``None`` for ``None`` (UUID columns that may be empty)."""
    return None if value is None else str(value)
