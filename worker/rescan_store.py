"""A rescan's state in PostgreSQL: what was asked, how far each partition was read, the report.

``rescans`` holds one row per rescan (its window, model, whether it applies, the report so far);
``rescan_partitions`` the next offset to read and the window's end offset per partition
(migration 0081). :meth:`RescanStore.commit_batch` moves both forward in the transaction that
applies a batch, so a rescan that stops anywhere resumes at its last committed batch and never
applies a message twice; every update is also guarded by the verdict's own ``rescan_id``.

Applying a batch first locks its review items and reads where each stands
(``modstream_review_item_states``, migration 0090; ``worker.rescan_review``): a verdict a person
has keeps its decision and gets the would-be verdict beside it (``rescan_*`` columns); every
other verdict is updated in place and stamped, changed or not, and its review item follows:
closed (with a system event) when no longer escalated, reopened or opened when escalated.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
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
from worker.rescan_plan import OffsetRange, RescanPlan, StoredDecision
from worker.rescan_review import (
    AppliedBatch,
    ItemAction,
    Redecided,
    ReviewState,
    item_action,
)

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

# The stored decision and where its review item stands (the item's state is read by the
# owner's function: the worker's login cannot read review_items' status itself).
_SELECT_STORED = """
SELECT v.source_partition, v.source_offset, v.decision, v.escalated, v.category, v.message_id,
       COALESCE(r.state, 'none') AS review_state
FROM unnest($2::int[], $3::bigint[], $4::timestamptz[]) AS x(p, o, s)
JOIN verdicts v ON v.source_topic = $1 AND v.source_partition = x.p AND v.source_offset = x.o
               AND v.sent_at = x.s
LEFT JOIN modstream_review_item_states($1, $2::int[], $3::bigint[]) AS r
       ON r.source_partition = x.p AND r.source_offset = x.o
"""

# Locks the batch's review items until the transaction ends and says where each stands.
_LOCK_ITEMS = """
SELECT source_partition, source_offset, state FROM modstream_review_item_states($1, $2, $3)
"""

_ARRAYS = """
unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::text[],
       $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[], $13::real[], $14::text[],
       $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[],
       $22::uuid[], $23::real[], $24::real[], $25::text[], $26::text[]%s)
"""
"""The 26 arrays of ``verdict_arrays`` (``%s``: more arrays after them)."""

_COLUMNS = (
    "t, p, o, s, mid, gid, sid, h, d, db, e, c, pr, rs, rh, sc, sl, il, tl, mn, mv, b, q, i, ms, tn"
)

# The verdicts, the rescan id ($27) and whether each decision changed ($28): the decision and
# everything the model and the rules gave, with the rescan's provenance, for every verdict read
# (changed or not: each carries the model that decided it); only a changed one is published
# again. A row this rescan already stamped is left alone (the checkpoint makes that impossible;
# the guard makes it certain).
_APPLY = f"""
UPDATE verdicts v
SET decision = x.d, decided_by = x.db, escalated = x.e, category = x.c, priority = x.pr,
    reasons = ARRAY(SELECT jsonb_array_elements_text(x.rs::jsonb)), rule_hits = x.rh::jsonb,
    scores = x.sc::jsonb, sentiment_label = x.sl, intent_label = x.il, toxicity_label = x.tl,
    model_name = x.mn, model_version = x.mv, batch_id = x.b, inference_ms = x.i,
    model_spans = x.ms::jsonb,
    published = v.published AND NOT x.ch, updated_at = now(), rescan_id = $27,
    rescanned_at = now(), rescan_decision = NULL, rescan_decided_by = NULL,
    rescan_escalated = NULL, rescan_category = NULL, rescan_scores = NULL,
    rescan_model_name = NULL, rescan_model_version = NULL
FROM {_ARRAYS % ", $28::bool[]"} AS x({_COLUMNS}, ch)
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND v.rescan_id IS DISTINCT FROM $27
RETURNING v.source_topic, v.source_partition, v.source_offset
"""  # noqa: S608 (constants)

# A verdict a person has: its decision stays; what the rescan would decide now goes beside it,
# with the rescan id ($27). Returns whether the would-be verdict differs.
_KEEP = f"""
UPDATE verdicts v
SET rescan_decision = x.d, rescan_decided_by = x.db, rescan_escalated = x.e,
    rescan_category = x.c, rescan_scores = x.sc::jsonb, rescan_model_name = x.mn,
    rescan_model_version = x.mv, rescan_id = $27, rescanned_at = now()
FROM {_ARRAYS % ""} AS x({_COLUMNS})
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND v.rescan_id IS DISTINCT FROM $27
RETURNING (v.decision <> x.d OR v.escalated <> x.e) AS differs
"""  # noqa: S608 (constants)

_CLOSE_ITEMS = "SELECT modstream_rescan_close_items($1, $2::int[], $3::bigint[], $4, $5)"
_REOPEN_ITEMS = """
SELECT modstream_rescan_reopen_items($1, $2::int[], $3::bigint[], $4::text[], $5::real[],
                                     $6::text[], $7::text[], $8, $9)
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
                StoredDecision(
                    r["decision"],
                    r["escalated"],
                    r["category"],
                    r["message_id"],
                    ReviewState(r["review_state"]),
                )
            )
            for r in rows
        }

    async def commit_batch(
        self,
        rescan_id: uuid.UUID,
        *,
        next_offsets: Mapping[int, int],
        report: Callable[[AppliedBatch], Mapping[str, Any]],
        decided: Sequence[Redecided] = (),
        model: str = "",
        finished: bool = False,
    ) -> AppliedBatch:
        """In one transaction: apply ``decided`` (module docstring; ``model`` names the rescan's
        model in the review items' events), move the partitions to ``next_offsets`` and save
        ``report(applied)`` (so the saved report counts exactly what was applied). Returns what
        was applied."""
        pool = self._database.pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                applied = (
                    await _apply(conn, rescan_id, decided, model) if decided else AppliedBatch()
                )
                if next_offsets:
                    await conn.execute(
                        _CHECKPOINT, rescan_id, list(next_offsets), list(next_offsets.values())
                    )
                await conn.execute(
                    _SAVE_REPORT, rescan_id, orjson.dumps(dict(report(applied))).decode(), finished
                )
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "rescan write") from exc
        return applied

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


async def _apply(
    conn: Any, rescan_id: uuid.UUID, decided: Sequence[Redecided], model: str
) -> AppliedBatch:
    """Lock the batch's review items, keep what a person has, update the rest and make their
    review items follow (module docstring)."""
    topic = decided[0].verdict.position.topic
    _, partitions, offsets = position_arrays(d.verdict.position for d in decided)
    states = {
        SourcePosition(topic, int(r[0]), int(r[1])): ReviewState(r[2])
        for r in await conn.fetch(_LOCK_ITEMS, topic, partitions, offsets)
    }

    def state(item: Redecided) -> ReviewState:
        return states.get(item.verdict.position, ReviewState.NONE)

    held = [d for d in decided if state(d).stands]
    free = [d for d in decided if not state(d).stands]
    differs: list[bool] = []
    if held:
        rows = await conn.fetch(_KEEP, *verdict_arrays([d.verdict for d in held]), rescan_id)
        differs = [bool(r["differs"]) for r in rows]
    stamped: set[SourcePosition] = set()
    if free:
        rows = await conn.fetch(
            _APPLY,
            *verdict_arrays([d.verdict for d in free]),
            rescan_id,
            [d.changed for d in free],
        )
        stamped = {SourcePosition(r[0], int(r[1]), int(r[2])) for r in rows}
    # Only the verdicts stamped now move their items (a resumed batch moves nothing twice).
    actions: dict[ItemAction, list[Redecided]] = {action: [] for action in ItemAction}
    for item in free:
        if item.verdict.position in stamped:
            actions[item_action(state(item), item.verdict.result.escalate)].append(item)
    closed = await _close(conn, topic, actions[ItemAction.CLOSE], rescan_id, model)
    opened = await _reopen(conn, topic, actions[ItemAction.REOPEN], rescan_id, model)
    fresh = [Escalation(d.verdict, d.message_text) for d in actions[ItemAction.OPEN]]
    if fresh:
        await conn.execute(INSERT_REVIEW_ITEMS, *review_item_arrays(fresh))
    return AppliedBatch(
        updated=frozenset(d.verdict.position for d in free if d.changed) & stamped,
        stamped=len(stamped),
        kept=len(differs),
        kept_differs=sum(differs),
        closed=closed,
        opened=opened + len(fresh),
    )


async def _close(
    conn: Any, topic: str, items: Sequence[Redecided], rescan_id: uuid.UUID, model: str
) -> int:
    if not items:
        return 0
    _, partitions, offsets = position_arrays(d.verdict.position for d in items)
    return int(await conn.fetchval(_CLOSE_ITEMS, topic, partitions, offsets, rescan_id, model))


async def _reopen(
    conn: Any, topic: str, items: Sequence[Redecided], rescan_id: uuid.UUID, model: str
) -> int:
    if not items:
        return 0
    _, partitions, offsets = position_arrays(d.verdict.position for d in items)
    results = [d.verdict.result for d in items]
    return int(
        await conn.fetchval(
            _REOPEN_ITEMS,
            topic,
            partitions,
            offsets,
            [r.category for r in results],
            [r.priority for r in results],
            [r.decision.value for r in results],
            [orjson.dumps(list(r.reasons)).decode() for r in results],
            rescan_id,
            model,
        )
    )
