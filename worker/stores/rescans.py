"""A rescan's state in PostgreSQL: what was asked, how far each partition was read, the report.

``rescans`` holds one row per rescan (its window, model, whether it applies, the report so far);
``rescan_partitions`` the next offset to read and the window's end offset per partition
(migration 0081). :meth:`RescanStore.commit_batch` moves both forward in the transaction that
applies a batch's changed verdicts (and opens their new review items), so a rescan that stops
anywhere resumes at its last committed batch and never applies a message twice; the update is
also guarded by the verdict's own ``rescan_id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict
from worker.rescan_plan import OffsetRange, RescanPlan, StoredDecision
from worker.stores.arrays import verdict_arrays
from worker.stores.database import (
    STORE_DRIVER_ERRORS,
    UNAVAILABLE_ERRORS,
    Database,
    StoreUnavailable,
    store_failure,
)
from worker.stores.review_items import INSERT_REVIEW_ITEMS, Escalation, review_item_arrays

__all__ = ["RescanStore"]


_INSERT_RESCAN = """
INSERT INTO rescans (rescan_id, source_topic, group_id, since, until, model_name, model_version,
                     apply, report)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)
"""

_INSERT_PARTITIONS = """
INSERT INTO rescan_partitions (rescan_id, source_partition, next_offset, end_offset)
SELECT $1, * FROM unnest($2::int[], $3::bigint[], $4::bigint[])
"""

_SELECT_RESCAN = """
SELECT rescan_id, source_topic, group_id, since, until, model_name, model_version, apply,
       report::text AS report, finished_at
FROM rescans WHERE rescan_id = $1
"""

_SELECT_PARTITIONS = """
SELECT source_partition, next_offset, end_offset FROM rescan_partitions
WHERE rescan_id = $1 ORDER BY source_partition
"""

_SELECT_STORED = """
SELECT v.source_partition, v.source_offset, v.decision, v.escalated, v.category, v.message_id
FROM unnest($2::int[], $3::bigint[], $4::timestamptz[]) AS x(p, o, s)
JOIN verdicts v ON v.source_topic = $1 AND v.source_partition = x.p AND v.source_offset = x.o
               AND v.sent_at = x.s
"""

# The 24 arrays of ``verdict_arrays`` and the rescan id: the decision and everything the model
# and the rules gave, with the rescan's provenance; a row this rescan already changed is left
# alone (the checkpoint makes that impossible; the guard makes it certain).
_APPLY = """
UPDATE verdicts v
SET decision = x.d, decided_by = x.db, escalated = x.e, category = x.c, priority = x.pr,
    reasons = ARRAY(SELECT jsonb_array_elements_text(x.rs::jsonb)), rule_hits = x.rh::jsonb,
    scores = x.sc::jsonb, sentiment_label = x.sl, intent_label = x.il, toxicity_label = x.tl,
    model_name = x.mn, model_version = x.mv, batch_id = x.b, inference_ms = x.i,
    published = false, updated_at = now(), rescan_id = $25, rescanned_at = now()
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[],
            $13::real[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
            $19::text[], $20::text[], $21::text[], $22::uuid[], $23::real[], $24::real[])
     AS x(t, p, o, s, mid, gid, sid, h, d, db, e, c, pr, rs, rh, sc, sl, il, tl, mn, mv, b, q, i)
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND v.rescan_id IS DISTINCT FROM $25
RETURNING v.source_topic, v.source_partition, v.source_offset
"""

_CHECKPOINT = """
UPDATE rescan_partitions r SET next_offset = x.o
FROM unnest($2::int[], $3::bigint[]) AS x(p, o)
WHERE r.rescan_id = $1 AND r.source_partition = x.p
"""

_SAVE_REPORT = """
UPDATE rescans SET report = $2::jsonb, updated_at = now(),
                   finished_at = CASE WHEN $3 THEN now() ELSE finished_at END
WHERE rescan_id = $1
"""

# Verdicts of the window whose records the topic no longer holds (offsets the rescan had still
# to read, below the partition's log start): counted, never silently skipped.
_COUNT_EXPIRED = """
SELECT count(*)
FROM verdicts v
JOIN unnest($5::int[], $6::bigint[], $7::bigint[]) AS x(p, lo, hi) ON v.source_partition = x.p
WHERE v.source_topic = $1 AND v.sent_at >= $2 AND v.sent_at < $3
  AND ($4::text IS NULL OR v.group_id = $4) AND v.source_offset >= x.lo AND v.source_offset < x.hi
"""


class RescanStore:
    """Creates, loads and moves forward a rescan's rows (module docstring)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def create(self, plan: RescanPlan) -> None:
        pool = self._database.pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    _INSERT_RESCAN,
                    plan.rescan_id,
                    plan.topic,
                    plan.group_id,
                    plan.since,
                    plan.until,
                    plan.model_name,
                    plan.model_version,
                    plan.apply,
                    orjson.dumps(dict(plan.report)).decode(),
                )
                await conn.execute(
                    _INSERT_PARTITIONS,
                    plan.rescan_id,
                    [r.partition for r in plan.ranges],
                    [r.start for r in plan.ranges],
                    [r.end for r in plan.ranges],
                )
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "rescan create") from exc

    async def load(self, rescan_id: uuid.UUID) -> RescanPlan | None:
        """The rescan as last committed, or ``None`` if there is no such rescan."""
        pool = self._database.pool()
        try:
            row = await pool.fetchrow(_SELECT_RESCAN, rescan_id)
            parts = await pool.fetch(_SELECT_PARTITIONS, rescan_id)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"rescan read failed: {type(exc).__name__}") from exc
        if row is None:
            return None
        return RescanPlan(
            rescan_id=row["rescan_id"],
            topic=row["source_topic"],
            group_id=row["group_id"],
            since=row["since"],
            until=row["until"],
            model_name=row["model_name"],
            model_version=row["model_version"],
            apply=row["apply"],
            ranges=tuple(
                OffsetRange(int(p["source_partition"]), int(p["next_offset"]), int(p["end_offset"]))
                for p in parts
            ),
            report=orjson.loads(row["report"]),
            finished=row["finished_at"] is not None,
        )

    async def stored(
        self, topic: str, keys: Sequence[tuple[SourcePosition, datetime]]
    ) -> dict[SourcePosition, StoredDecision]:
        """The stored decisions of the messages at ``keys`` (position and ``sent_at``); a
        message without a verdict is absent."""
        pool = self._database.pool()
        try:
            rows = await pool.fetch(
                _SELECT_STORED,
                topic,
                [p.partition for p, _ in keys],
                [p.offset for p, _ in keys],
                [s for _, s in keys],
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"verdict read failed: {type(exc).__name__}") from exc
        return {
            SourcePosition(topic, int(r["source_partition"]), int(r["source_offset"])): (
                StoredDecision(r["decision"], r["escalated"], r["category"], r["message_id"])
            )
            for r in rows
        }

    async def commit_batch(
        self,
        rescan_id: uuid.UUID,
        *,
        next_offsets: Mapping[int, int],
        report: Callable[[set[SourcePosition]], Mapping[str, Any]],
        changed: Sequence[Verdict] = (),
        escalations: Sequence[Escalation] = (),
        finished: bool = False,
    ) -> set[SourcePosition]:
        """In one transaction: update ``changed`` verdicts with this rescan's provenance, add
        the review items of those updated, move the partitions to ``next_offsets`` and save
        ``report(updated)`` (so the saved report counts exactly what was applied). Returns the
        verdicts updated."""
        pool = self._database.pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                updated: set[SourcePosition] = set()
                if changed:
                    rows = await conn.fetch(_APPLY, *verdict_arrays(changed), rescan_id)
                    updated = {SourcePosition(r[0], int(r[1]), int(r[2])) for r in rows}
                fresh = [e for e in escalations if e.verdict.position in updated]
                if fresh:
                    await conn.execute(INSERT_REVIEW_ITEMS, *review_item_arrays(fresh))
                if next_offsets:
                    await conn.execute(
                        _CHECKPOINT, rescan_id, list(next_offsets), list(next_offsets.values())
                    )
                await conn.execute(
                    _SAVE_REPORT, rescan_id, orjson.dumps(dict(report(updated))).decode(), finished
                )
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "rescan write") from exc
        return updated

    async def count_expired(self, plan: RescanPlan, gone: Sequence[OffsetRange]) -> int:
        """Verdicts of the window whose records have left the topic: per partition, those
        stored at offsets ``start`` to ``end`` (the log start when the records were removed)."""
        pool = self._database.pool()
        try:
            value = await pool.fetchval(
                _COUNT_EXPIRED,
                plan.topic,
                plan.since,
                plan.until,
                plan.group_id,
                [r.partition for r in gone],
                [r.start for r in gone],
                [r.end for r in gone],
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"expired count failed: {type(exc).__name__}") from exc
        return int(value or 0)
