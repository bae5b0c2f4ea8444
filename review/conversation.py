"""The conversation around an escalated message: a bounded window of its group's messages.

Threats, grooming and harassment are read in context, so the item view shows the messages of the
item's group (within the item's tenant: another tenant's group of the same id is another group)
just before and just after it (``ReviewSettings.context_before`` /
``context_after``, within ``context_hours`` of it), in the order they were sent, each with its
sender (and whether it is the escalated message's sender) and its verdict.

modstream keeps message text only where someone needs it, so only some messages of the window
have text:

* an escalation's text (``review_items.message_text``), until retention clears it after the
  item is resolved or closed (``modstream retention --keep-text``); shown only when the item is
  in the viewer's queues (its queue and category), like every text of the review service;
* a message decided without the model (``pending_texts``), until it is re-scored or retention
  deletes it; shown unless its rules-only category is outside the viewer's categories.

Every other message shows its sender, time and verdict, and says why there is no text
(``TextState``). The window is read only for a viewer who may read the item's text (the holder
of its live claim, or an admin); the caller records the view in the audit trail
(``review_events``, ``view_text``, with the ids of the messages whose text was shown).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from review.schemas import ConversationMessage, TextState, User

if TYPE_CHECKING:
    from review.queue import Conn

__all__ = ["conversation_window"]

# One bind per value; the SQL is a constant. $1 group, $2 sent_at, $3 topic, $4 partition,
# $5 offset, $6 before, $7 after, $8 how far in time, $9 user's queues, $10 user's categories,
# $11 the item's sender, $12 the item's tenant (a group id names a group within its tenant).
_WINDOW = """
WITH here AS (
    SELECT $1::text AS group_id, $2::timestamptz AS sent_at, $3::text AS topic,
           $4::integer AS part, $5::bigint AS off, $8::interval AS span
),
around AS (
    (SELECT v.source_topic, v.source_partition, v.source_offset, v.sent_at, v.message_id,
            v.sender_id, v.decision, v.category, false AS is_item
       FROM verdicts v, here h
      WHERE v.group_id = h.group_id AND v.tenant = $12::text
        AND v.sent_at <= h.sent_at AND v.sent_at >= h.sent_at - h.span
        AND (v.sent_at, v.source_topic, v.source_partition, v.source_offset)
            < (h.sent_at, h.topic, h.part, h.off)
      ORDER BY v.sent_at DESC, v.source_topic DESC, v.source_partition DESC,
               v.source_offset DESC
      LIMIT $6::integer)
    UNION ALL
    (SELECT v.source_topic, v.source_partition, v.source_offset, v.sent_at, v.message_id,
            v.sender_id, v.decision, v.category, true AS is_item
       FROM verdicts v, here h
      WHERE v.group_id = h.group_id AND v.tenant = $12::text AND v.sent_at = h.sent_at
        AND v.source_topic = h.topic
        AND v.source_partition = h.part AND v.source_offset = h.off)
    UNION ALL
    (SELECT v.source_topic, v.source_partition, v.source_offset, v.sent_at, v.message_id,
            v.sender_id, v.decision, v.category, false AS is_item
       FROM verdicts v, here h
      WHERE v.group_id = h.group_id AND v.tenant = $12::text
        AND v.sent_at >= h.sent_at AND v.sent_at <= h.sent_at + h.span
        AND (v.sent_at, v.source_topic, v.source_partition, v.source_offset)
            > (h.sent_at, h.topic, h.part, h.off)
      ORDER BY v.sent_at, v.source_topic, v.source_partition, v.source_offset
      LIMIT $7::integer)
)
SELECT a.message_id, a.sender_id, a.sent_at, a.decision, a.category, a.is_item,
       a.sender_id = $11::text AS same_sender,
       r.id IS NOT NULL AS escalated,
       r.id IS NOT NULL AND r.queue = ANY($9::text[])
           AND ($10::text[] IS NULL OR r.category = ANY($10::text[])) AS in_queues,
       NULLIF(r.message_text, '') AS escalated_text,
       ($10::text[] IS NULL OR a.category IS NULL OR a.category = ANY($10::text[]))
           AS pending_in_queues,
       p.message_text AS pending_text
  FROM around a
  LEFT JOIN review_items r
         ON r.source_topic = a.source_topic AND r.source_partition = a.source_partition
        AND r.source_offset = a.source_offset
  LEFT JOIN pending_texts p
         ON p.source_topic = a.source_topic AND p.source_partition = a.source_partition
        AND p.source_offset = a.source_offset
 ORDER BY a.sent_at, a.source_topic, a.source_partition, a.source_offset
"""


def _message(row: Any) -> ConversationMessage:
    text: str | None = None
    if row["escalated"]:
        if not row["in_queues"]:
            state = TextState.OUTSIDE_QUEUES
        elif row["escalated_text"] is None:
            state = TextState.CLEARED
        else:
            state, text = TextState.SHOWN, row["escalated_text"]
    elif row["pending_text"] is not None:
        if row["pending_in_queues"]:
            state, text = TextState.SHOWN, row["pending_text"]
        else:
            state = TextState.OUTSIDE_QUEUES
    else:
        state = TextState.NOT_RETAINED
    return ConversationMessage(
        message_id=row["message_id"],
        sender_id=row["sender_id"],
        same_sender=bool(row["same_sender"]),
        sent_at=row["sent_at"],
        decision=row["decision"],
        category=row["category"],
        is_item=bool(row["is_item"]),
        text=text,
        text_state=state,
    )


async def conversation_window(
    conn: Conn,
    item: Any,
    user: User,
    *,
    before: int,
    after: int,
    hours: float,
) -> list[ConversationMessage]:
    """The messages of ``item``'s group around it (``item``: its ``review_items`` row), oldest
    first, the item itself among them (module docs). Call it only for a viewer who may read the
    item's text, and audit the answer."""
    rows = await conn.fetch(
        _WINDOW,
        item["group_id"],
        item["sent_at"],
        item["source_topic"],
        item["source_partition"],
        item["source_offset"],
        before,
        after,
        timedelta(hours=hours),
        user.queues,
        user.category_list,
        item["sender_id"],
        item["tenant"],
    )
    return [_message(row) for row in rows]
