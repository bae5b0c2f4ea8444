"""Escalations as the worker stores them for human review (``review_items``), with their tenant.

The verdict transaction of a batch, and the re-scoring transaction, add one review item per
escalated verdict, with the text the moderator must read. Inserts are idempotent on the record's
Kafka coordinates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pipelines.verdict import Verdict

__all__ = ["INSERT_REVIEW_ITEMS", "Escalation", "review_item_arrays"]


@dataclass(frozen=True, slots=True)
class Escalation:
    """A verdict that goes to human review, with the text the moderator must read."""

    verdict: Verdict
    message_text: str


INSERT_REVIEW_ITEMS = """
INSERT INTO review_items (
    source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
    message_text, category, priority, auto_decision, reasons, tenant)
SELECT t, p, o, s, mid, gid, sid, txt, c, pr, d, ARRAY(SELECT jsonb_array_elements_text(rs::jsonb)),
       tn
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::real[], $11::text[], $12::text[],
            $13::text[])
     AS x(t, p, o, s, mid, gid, sid, txt, c, pr, d, rs, tn)
ON CONFLICT (source_topic, source_partition, source_offset) DO NOTHING
"""


def review_item_arrays(escalations: Sequence[Escalation]) -> list[list[Any]]:
    """The thirteen arrays ``INSERT_REVIEW_ITEMS`` takes."""
    cols: list[list[Any]] = [[] for _ in range(13)]
    for e in escalations:
        v = e.verdict
        row: tuple[Any, ...] = (
            v.position.topic,
            v.position.partition,
            v.position.offset,
            v.sent_at,
            v.message_id,
            v.group_id,
            v.sender_id,
            e.message_text,
            v.result.category,
            v.result.priority,
            v.result.decision.value,
            orjson.dumps(list(v.result.reasons)).decode(),
            v.tenant,
        )
        for col, value in zip(cols, row, strict=True):
            col.append(value)
    return cols
