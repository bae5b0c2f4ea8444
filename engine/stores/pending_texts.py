"""Texts of ``pending_model`` verdicts, kept until the model re-scores them.

A verdict decided without the model stores its text in ``pending_texts`` in the batch's own
transaction (``INSERT_PENDING_TEXTS``). Re-scoring reads them back with their verdicts
(``PendingTextStore.pending_model_rows``), then updates the verdicts in place, adds their
escalations and forgets the texts in one transaction (``apply_rescore``). A row whose text the
model refuses is recorded in ``rescore_rejections`` (a :class:`RescoreRejection`) in that same
transaction and its text forgotten: its rules-only verdict stays and it is not re-scored again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from engine.stores.arrays import position_arrays, verdict_arrays
from engine.stores.database import (
    STORE_DRIVER_ERRORS,
    UNAVAILABLE_ERRORS,
    Database,
    StoreUnavailable,
    store_failure,
)
from engine.stores.review_items import INSERT_REVIEW_ITEMS, Escalation, review_item_arrays
from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict
from pipelines.verdict_factory import MessageFacts

__all__ = [
    "INSERT_PENDING_TEXTS",
    "PendingRow",
    "PendingText",
    "PendingTextStore",
    "RescoreRejection",
    "pending_text_arrays",
]


@dataclass(frozen=True, slots=True)
class PendingText:
    """The text of a verdict decided without the model, kept until it is re-scored."""

    position: SourcePosition
    sent_at: datetime
    text: str


@dataclass(frozen=True, slots=True)
class PendingRow:
    """A ``pending_model`` verdict with everything re-scoring needs (read back from Postgres)."""

    facts: MessageFacts
    rule_hits: list[dict[str, Any]]
    queue_ms: float
    text: str


@dataclass(frozen=True, slots=True)
class RescoreRejection:
    """A pending verdict the model refused to score: kept rules-only, never re-scored."""

    position: SourcePosition
    sent_at: datetime
    reason: str
    """Why, without message text (e.g. the Triton status)."""


INSERT_PENDING_TEXTS = """
INSERT INTO pending_texts (source_topic, source_partition, source_offset, sent_at, message_text)
SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[])
ON CONFLICT DO NOTHING
"""


def pending_text_arrays(texts: Sequence[PendingText]) -> list[list[Any]]:
    """The five arrays ``INSERT_PENDING_TEXTS`` takes."""
    topics, partitions, offsets = position_arrays(t.position for t in texts)
    return [topics, partitions, offsets, [t.sent_at for t in texts], [t.text for t in texts]]


_SELECT_PENDING = """
SELECT v.source_topic, v.source_partition, v.source_offset, v.sent_at, v.message_id, v.group_id,
       v.sender_id, v.text_sha256, v.rule_hits::text AS rule_hits, v.queue_ms, t.message_text,
       v.tenant
FROM pending_texts t
JOIN verdicts v ON v.source_topic = t.source_topic AND v.source_partition = t.source_partition
               AND v.source_offset = t.source_offset AND v.sent_at = t.sent_at
WHERE v.decided_by = 'pending_model'
  AND ($1::text IS NULL OR t.source_topic = $1)
  AND ($2::int[] IS NULL OR t.source_partition = ANY($2))
ORDER BY t.created_at
LIMIT $3
"""

_ORPHAN_PENDING = """
DELETE FROM pending_texts t
WHERE t.created_at < now() - interval '1 minute'
  AND NOT EXISTS (
    SELECT 1 FROM verdicts v
    WHERE v.source_topic = t.source_topic AND v.source_partition = t.source_partition
      AND v.source_offset = t.source_offset AND v.sent_at = t.sent_at
      AND v.decided_by = 'pending_model')
"""

# The 26 arrays of ``verdict_arrays``; only the model-dependent columns change, and only while
# the row is still pending (a second re-scorer racing on the same row updates nothing).
_APPLY_RESCORE = """
UPDATE verdicts v
SET decision = x.d, decided_by = x.db, escalated = x.e, category = x.c, priority = x.pr,
    reasons = ARRAY(SELECT jsonb_array_elements_text(x.rs::jsonb)), scores = x.sc::jsonb,
    sentiment_label = x.sl, intent_label = x.il, toxicity_label = x.tl, model_name = x.mn,
    model_version = x.mv, batch_id = x.b, inference_ms = x.i, model_spans = x.ms::jsonb,
    published = false,
    updated_at = now()
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[],
            $13::real[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
            $19::text[], $20::text[], $21::text[], $22::uuid[], $23::real[], $24::real[],
            $25::text[], $26::text[])
     AS x(t, p, o, s, mid, gid, sid, h, d, db, e, c, pr, rs, rh, sc, sl, il, tl, mn, mv, b, q, i,
          ms, tn)
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND v.decided_by = 'pending_model'
RETURNING v.source_topic, v.source_partition, v.source_offset
"""

_INSERT_REJECTIONS = """
INSERT INTO rescore_rejections (source_topic, source_partition, source_offset, sent_at, reason)
SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[])
ON CONFLICT DO NOTHING
"""

_DELETE_PENDING_TEXTS = """
DELETE FROM pending_texts t
USING unnest($1::text[], $2::int[], $3::bigint[]) AS x(tp, p, o)
WHERE t.source_topic = x.tp AND t.source_partition = x.p AND t.source_offset = x.o
"""


class PendingTextStore:
    """Reads pending verdicts with their texts and applies their re-scored versions."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def pending_model_rows(
        self, limit: int, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[PendingRow]:
        """Verdicts still waiting for the model, oldest first, with their stored text."""
        pool = self._database.pool()
        try:
            rows = await pool.fetch(
                _SELECT_PENDING, topic, list(partitions) if partitions is not None else None, limit
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"pending read failed: {type(exc).__name__}") from exc
        return [
            PendingRow(
                facts=MessageFacts(
                    position=SourcePosition(
                        r["source_topic"], int(r["source_partition"]), int(r["source_offset"])
                    ),
                    message_id=r["message_id"],
                    group_id=r["group_id"],
                    sender_id=r["sender_id"],
                    sent_at=r["sent_at"],
                    text_sha256=r["text_sha256"],
                    tenant=r["tenant"],
                ),
                rule_hits=orjson.loads(r["rule_hits"]),
                queue_ms=float(r["queue_ms"]),
                text=r["message_text"],
            )
            for r in rows
        ]

    async def apply_rescore(
        self,
        verdicts: Sequence[Verdict],
        escalations: Sequence[Escalation],
        done: Sequence[SourcePosition],
        rejected: Sequence[RescoreRejection] = (),
    ) -> set[SourcePosition]:
        """Update re-scored verdicts in place (only rows still pending), add their escalations,
        record the ``rejected`` rows and forget the texts of ``done`` and ``rejected``, in one
        transaction; returns the rows updated."""
        pool = self._database.pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                updated: set[SourcePosition] = set()
                if verdicts:
                    rows = await conn.fetch(_APPLY_RESCORE, *verdict_arrays(verdicts))
                    updated = {SourcePosition(r[0], int(r[1]), int(r[2])) for r in rows}
                fresh = [e for e in escalations if e.verdict.position in updated]
                if fresh:
                    await conn.execute(INSERT_REVIEW_ITEMS, *review_item_arrays(fresh))
                if rejected:
                    topics, partitions, offsets = position_arrays(r.position for r in rejected)
                    await conn.execute(
                        _INSERT_REJECTIONS,
                        topics,
                        partitions,
                        offsets,
                        [r.sent_at for r in rejected],
                        [r.reason for r in rejected],
                    )
                forget = [*done, *(r.position for r in rejected)]
                if forget:
                    await conn.execute(_DELETE_PENDING_TEXTS, *position_arrays(forget))
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "rescore write") from exc
        return updated

    async def drop_orphan_texts(self) -> int:
        """Forget texts whose verdict is no longer pending (a replay during an outage can store
        a text for a row the model already decided); returns how many were dropped."""
        pool = self._database.pool()
        try:
            status = await pool.execute(_ORPHAN_PENDING)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"orphan cleanup failed: {type(exc).__name__}") from exc
        return int(status.rsplit(" ", 1)[-1])
