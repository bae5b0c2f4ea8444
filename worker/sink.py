"""The Postgres sink: one transaction per batch for verdicts, escalations, dead letters, offsets.

Every insert is idempotent on the record's Kafka coordinates, and the consumer offsets written in
the same transaction only move forward (``GREATEST``), so replays after a crash or a rebalance
are absorbed instead of doubled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import asyncpg
import orjson

from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VERDICT_COLUMNS, verdict_row
from pipelines.verdict_factory import MessageFacts
from worker.offsets import PartitionKey
from worker.settings import PostgresSettings

__all__ = [
    "DeadLetter",
    "Escalation",
    "PendingRow",
    "PendingText",
    "PostgresSink",
    "SinkBatch",
    "SinkError",
    "SinkUnavailable",
]


class SinkError(Exception):
    retriable: ClassVar[bool] = False


class SinkUnavailable(SinkError):
    """Postgres cannot be reached or refused the connection; retry later, nothing is lost."""

    retriable = True


@dataclass(frozen=True, slots=True)
class DeadLetter:
    position: SourcePosition
    reason_code: str
    reason: str
    value_bytes: int


@dataclass(frozen=True, slots=True)
class Escalation:
    """A verdict that goes to human review, with the text the moderator must read."""

    verdict: Verdict
    message_text: str


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


@dataclass(slots=True)
class SinkBatch:
    verdicts: list[Verdict] = field(default_factory=list)
    escalations: list[Escalation] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    offsets: dict[PartitionKey, int] = field(default_factory=dict)
    """Next offset to read per partition, stored in the same transaction."""
    pending_texts: list[PendingText] = field(default_factory=list)
    """Texts of the batch's ``pending_model`` verdicts, so they can be re-scored later."""


_INSERT_VERDICTS = """
INSERT INTO verdicts (
    source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
    text_sha256, decision, decided_by, escalated, category, priority, reasons, rule_hits, scores,
    sentiment_label, intent_label, toxicity_label, model_name, model_version, batch_id,
    queue_ms, inference_ms)
SELECT t, p, o, s, mid, gid, sid, h, d, db, e, c, pr,
       ARRAY(SELECT jsonb_array_elements_text(rs::jsonb)), rh::jsonb, sc::jsonb,
       sl, il, tl, mn, mv, b, q, i
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[],
            $13::real[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
            $19::text[], $20::text[], $21::text[], $22::uuid[], $23::real[], $24::real[])
     AS x(t, p, o, s, mid, gid, sid, h, d, db, e, c, pr, rs, rh, sc, sl, il, tl, mn, mv, b, q, i)
ON CONFLICT DO NOTHING
"""

_INSERT_REVIEW_ITEMS = """
INSERT INTO review_items (
    source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
    message_text, category, priority, auto_decision, reasons)
SELECT t, p, o, s, mid, gid, sid, txt, c, pr, d, ARRAY(SELECT jsonb_array_elements_text(rs::jsonb))
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::real[], $11::text[], $12::text[])
     AS x(t, p, o, s, mid, gid, sid, txt, c, pr, d, rs)
ON CONFLICT (source_topic, source_partition, source_offset) DO NOTHING
"""

_INSERT_DEAD_LETTERS = """
INSERT INTO dead_letters (source_topic, source_partition, source_offset, reason_code, reason,
                          value_bytes)
SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::text[], $6::int[])
ON CONFLICT DO NOTHING
"""

_UPSERT_OFFSETS = """
INSERT INTO consumer_offsets (consumer_group, topic, partition, next_offset)
SELECT $1, t, p, o FROM unnest($2::text[], $3::int[], $4::bigint[]) AS x(t, p, o)
ON CONFLICT (consumer_group, topic, partition) DO UPDATE
SET next_offset = GREATEST(consumer_offsets.next_offset, EXCLUDED.next_offset), updated_at = now()
"""

_MARK_PUBLISHED = """
UPDATE verdicts v SET published = true
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[]) AS x(t, p, o, s)
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND NOT v.published
"""


_INSERT_PENDING_TEXTS = """
INSERT INTO pending_texts (source_topic, source_partition, source_offset, sent_at, message_text)
SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[])
ON CONFLICT DO NOTHING
"""

_SELECT_PENDING = """
SELECT v.source_topic, v.source_partition, v.source_offset, v.sent_at, v.message_id, v.group_id,
       v.sender_id, v.text_sha256, v.rule_hits::text AS rule_hits, v.queue_ms, t.message_text
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

# Same 24 arrays as _INSERT_VERDICTS; only the model-dependent columns change, and only while
# the row is still pending (a second re-scorer racing on the same row updates nothing).
_APPLY_RESCORE = """
UPDATE verdicts v
SET decision = x.d, decided_by = x.db, escalated = x.e, category = x.c, priority = x.pr,
    reasons = ARRAY(SELECT jsonb_array_elements_text(x.rs::jsonb)), scores = x.sc::jsonb,
    sentiment_label = x.sl, intent_label = x.il, toxicity_label = x.tl, model_name = x.mn,
    model_version = x.mv, batch_id = x.b, inference_ms = x.i, published = false,
    updated_at = now()
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[],
            $13::real[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
            $19::text[], $20::text[], $21::text[], $22::uuid[], $23::real[], $24::real[])
     AS x(t, p, o, s, mid, gid, sid, h, d, db, e, c, pr, rs, rh, sc, sl, il, tl, mn, mv, b, q, i)
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND v.decided_by = 'pending_model'
RETURNING v.source_topic, v.source_partition, v.source_offset
"""

_DELETE_PENDING_TEXTS = """
DELETE FROM pending_texts t
USING unnest($1::text[], $2::int[], $3::bigint[]) AS x(tp, p, o)
WHERE t.source_topic = x.tp AND t.source_partition = x.p AND t.source_offset = x.o
"""

_SELECT_UNPUBLISHED = """
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits::text AS rule_hits,
       scores::text AS scores, sentiment_label, intent_label, toxicity_label, model_name,
       model_version, batch_id, created_at, updated_at
FROM verdicts
WHERE NOT published
  AND updated_at < now() - make_interval(secs => $1)
  AND ($2::text IS NULL OR source_topic = $2)
  AND ($3::int[] IS NULL OR source_partition = ANY($3))
ORDER BY created_at
LIMIT $4
"""


def _dumps(obj: object) -> str:
    return orjson.dumps(obj).decode()


def _position_columns(
    positions: Iterable[SourcePosition],
) -> tuple[list[str], list[int], list[int]]:
    """Topic, partition and offset arrays for an ``unnest`` insert."""
    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    for p in positions:
        topics.append(p.topic)
        partitions.append(p.partition)
        offsets.append(p.offset)
    return topics, partitions, offsets


def _verdict_columns(verdicts: Sequence[Verdict]) -> list[list[Any]]:
    cols: list[list[Any]] = [[] for _ in VERDICT_COLUMNS]
    for v in verdicts:
        for col, value in zip(cols, verdict_row(v), strict=True):
            col.append(value)
    return cols


def _review_columns(escalations: Sequence[Escalation]) -> list[list[Any]]:
    cols: list[list[Any]] = [[] for _ in range(12)]
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
            _dumps(list(v.result.reasons)),
        )
        for col, value in zip(cols, row, strict=True):
            col.append(value)
    return cols


_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
)

_PING_ERRORS: tuple[type[BaseException], ...] = (*_UNAVAILABLE_ERRORS, asyncpg.PostgresError)


class PostgresSink:
    def __init__(self, settings: PostgresSettings, consumer_group: str) -> None:
        self._settings = settings
        self._group = consumer_group
        self._pool: asyncpg.Pool[Any] | None = None

    async def start(self) -> None:
        if self._pool is not None:
            return
        try:
            self._pool = await asyncpg.create_pool(
                self._settings.dsn.get_secret_value(),
                min_size=self._settings.min_pool_size,
                max_size=self._settings.max_pool_size,
                command_timeout=self._settings.command_timeout_s,
            )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"cannot connect: {type(exc).__name__}") from exc

    async def stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> PostgresSink:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _require_pool(self) -> asyncpg.Pool[Any]:
        if self._pool is None:
            raise SinkUnavailable("sink not started")
        return self._pool

    async def write(self, batch: SinkBatch) -> None:
        """Store the whole batch atomically; raise ``SinkUnavailable`` to be retried."""
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                if batch.verdicts:
                    await conn.execute(_INSERT_VERDICTS, *_verdict_columns(batch.verdicts))
                if batch.escalations:
                    await conn.execute(_INSERT_REVIEW_ITEMS, *_review_columns(batch.escalations))
                if batch.dead_letters:
                    d = batch.dead_letters
                    await conn.execute(
                        _INSERT_DEAD_LETTERS,
                        *_position_columns(x.position for x in d),
                        [x.reason_code for x in d],
                        [x.reason for x in d],
                        [x.value_bytes for x in d],
                    )
                if batch.pending_texts:
                    pt = batch.pending_texts
                    await conn.execute(
                        _INSERT_PENDING_TEXTS,
                        *_position_columns(x.position for x in pt),
                        [x.sent_at for x in pt],
                        [x.text for x in pt],
                    )
                if batch.offsets:
                    keys = sorted(batch.offsets)  # fixed lock order between concurrent batches
                    await conn.execute(
                        _UPSERT_OFFSETS,
                        self._group,
                        [k[0] for k in keys],
                        [k[1] for k in keys],
                        [batch.offsets[k] for k in keys],
                    )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"write failed: {type(exc).__name__}") from exc
        except asyncpg.PostgresError as exc:
            raise SinkError(f"write rejected: {exc.sqlstate}") from exc

    async def stored_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Next offset to read for each partition that has one stored."""
        pool = self._require_pool()
        try:
            rows = await pool.fetch(
                "SELECT partition, next_offset FROM consumer_offsets "
                "WHERE consumer_group = $1 AND topic = $2 AND partition = ANY($3::int[])",
                self._group,
                topic,
                list(partitions),
            )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"offset read failed: {type(exc).__name__}") from exc
        return {int(r["partition"]): int(r["next_offset"]) for r in rows}

    async def mark_published(self, keys: Sequence[tuple[SourcePosition, datetime]]) -> None:
        if not keys:
            return
        pool = self._require_pool()
        try:
            await pool.execute(
                _MARK_PUBLISHED,
                [k[0].topic for k in keys],
                [k[0].partition for k in keys],
                [k[0].offset for k in keys],
                [k[1] for k in keys],
            )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"mark published failed: {type(exc).__name__}") from exc

    async def pending_model_rows(
        self, limit: int, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[PendingRow]:
        """Verdicts still waiting for the model, oldest first, with their stored text."""
        pool = self._require_pool()
        try:
            rows = await pool.fetch(
                _SELECT_PENDING, topic, list(partitions) if partitions is not None else None, limit
            )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"pending read failed: {type(exc).__name__}") from exc
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
    ) -> set[SourcePosition]:
        """Update re-scored verdicts in place (only rows still pending), add their escalations
        and forget the texts of ``done``, in one transaction; returns the rows updated."""
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                updated: set[SourcePosition] = set()
                if verdicts:
                    rows = await conn.fetch(_APPLY_RESCORE, *_verdict_columns(verdicts))
                    updated = {SourcePosition(r[0], int(r[1]), int(r[2])) for r in rows}
                fresh = [e for e in escalations if e.verdict.position in updated]
                if fresh:
                    await conn.execute(_INSERT_REVIEW_ITEMS, *_review_columns(fresh))
                if done:
                    await conn.execute(
                        _DELETE_PENDING_TEXTS,
                        [p.topic for p in done],
                        [p.partition for p in done],
                        [p.offset for p in done],
                    )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"rescore write failed: {type(exc).__name__}") from exc
        except asyncpg.PostgresError as exc:
            raise SinkError(f"rescore write rejected: {exc.sqlstate}") from exc
        return updated

    async def drop_orphan_texts(self) -> int:
        """Forget texts whose verdict is no longer pending (a replay during an outage can store
        a text for a row the model already decided); returns how many were dropped."""
        pool = self._require_pool()
        try:
            status = await pool.execute(_ORPHAN_PENDING)
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"orphan cleanup failed: {type(exc).__name__}") from exc
        return int(status.rsplit(" ", 1)[-1])

    async def unpublished(
        self,
        min_age_s: float,
        limit: int,
        topic: str | None = None,
        partitions: Sequence[int] | None = None,
    ) -> list[dict[str, Any]]:
        """Verdict rows not marked published for at least ``min_age_s``, oldest first."""
        pool = self._require_pool()
        try:
            rows = await pool.fetch(
                _SELECT_UNPUBLISHED,
                float(min_age_s),
                topic,
                list(partitions) if partitions is not None else None,
                limit,
            )
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"unpublished read failed: {type(exc).__name__}") from exc
        return [dict(r) for r in rows]

    async def ensure_partitions(self, months_ahead: int = 3) -> None:
        pool = self._require_pool()
        await pool.execute(
            "SELECT modstream_ensure_verdict_partitions((now() - interval '1 month')::date, $1)",
            months_ahead + 2,
        )

    async def sender_strikes(self, sender_ids: Sequence[str]) -> dict[str, int]:
        """Live strike totals from moderators' decisions (``review/strikes.py``)."""
        from common.strikes import active_strikes

        try:
            return await active_strikes(self._require_pool(), sender_ids)
        except _UNAVAILABLE_ERRORS as exc:
            raise SinkUnavailable(f"strikes read failed: {type(exc).__name__}") from exc

    async def ping(self) -> bool:
        if self._pool is None:
            return False
        try:
            await self._pool.fetchval("SELECT 1", timeout=2.0)
        except _PING_ERRORS:
            return False
        return True
