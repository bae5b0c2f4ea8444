"""A batch's verdicts, escalations, dead letters, pending texts and offsets: one statement.

This is the one verdict write of both moderating services. The inserts are sent as the parts of
one statement (``engine.stores.one_statement``): one round trip per batch instead of one per
insert plus ``BEGIN`` and ``COMMIT``, equally atomic. The same statement carries the published
marks of verdicts that earlier statements stored and Kafka has since acknowledged
(``engine.stores.carried_marks``), as its last part: a batch costs one statement, not a write
and a mark. The online service puts its claims first in the same statement
(``online.claimed_writes``).

Every insert is idempotent on the record's Kafka coordinates, and the consumer offsets written in
the same transaction only move forward (``GREATEST``), so replays after a crash or a rebalance
are absorbed instead of doubled. The source reads those offsets back on assignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.stores.arrays import position_arrays, verdict_arrays
from engine.stores.carried_marks import CarriedMarks
from engine.stores.database import (
    STORE_DRIVER_ERRORS,
    UNAVAILABLE_ERRORS,
    Database,
    StoreUnavailable,
    store_failure,
)
from engine.stores.one_statement import one_statement
from engine.stores.partitions import ensure_verdict_partitions
from engine.stores.pending_texts import INSERT_PENDING_TEXTS, PendingText, pending_text_arrays
from engine.stores.published_marks import mark_part
from engine.stores.review_items import INSERT_REVIEW_ITEMS, Escalation, review_item_arrays
from pipelines.messages import PartitionKey, SourcePosition
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VerdictRowKey

__all__ = ["DeadLetter", "Part", "VerdictBatch", "VerdictBatchStore", "batch_parts"]

Part = tuple[str, Sequence[Any]]
"""One part of a statement: SQL numbered from ``$1`` and its arguments
(``engine.stores.one_statement``)."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record that got no verdict, as stored in ``dead_letters`` (its bytes go to the DLQ)."""

    position: SourcePosition
    reason_code: str
    reason: str
    value_bytes: int
    tenant: str | None = None
    """The message's tenant when it is known (its verdict could not be stored), ``None`` when
    the record could not be read far enough to say (stored as NULL)."""


@dataclass(slots=True)
class VerdictBatch:
    """Everything one batch stores, written atomically by ``VerdictBatchStore.write``."""

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
    queue_ms, inference_ms, model_spans, tenant)
SELECT t, p, o, s, mid, gid, sid, h, d, db, e, c, pr,
       ARRAY(SELECT jsonb_array_elements_text(rs::jsonb)), rh::jsonb, sc::jsonb,
       sl, il, tl, mn, mv, b, q, i, ms::jsonb, tn
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[],
            $13::real[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
            $19::text[], $20::text[], $21::text[], $22::uuid[], $23::real[], $24::real[],
            $25::text[], $26::text[])
     AS x(t, p, o, s, mid, gid, sid, h, d, db, e, c, pr, rs, rh, sc, sl, il, tl, mn, mv, b, q, i,
          ms, tn)
ON CONFLICT DO NOTHING
"""

_INSERT_DEAD_LETTERS = """
INSERT INTO dead_letters (source_topic, source_partition, source_offset, reason_code, reason,
                          value_bytes, tenant)
SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::text[], $6::int[],
                     $7::text[])
ON CONFLICT DO NOTHING
"""

_UPSERT_OFFSETS = """
INSERT INTO consumer_offsets (consumer_group, topic, partition, next_offset)
SELECT $1, t, p, o FROM unnest($2::text[], $3::int[], $4::bigint[]) AS x(t, p, o)
ON CONFLICT (consumer_group, topic, partition) DO UPDATE
SET next_offset = GREATEST(consumer_offsets.next_offset, EXCLUDED.next_offset), updated_at = now()
"""

_SELECT_OFFSETS = """
SELECT partition, next_offset FROM consumer_offsets
WHERE consumer_group = $1 AND topic = $2 AND partition = ANY($3::int[])
"""


def batch_parts(batch: VerdictBatch, consumer_group: str) -> list[Part]:
    """The inserts ``batch`` needs, with their arguments (empty kinds are left out)."""
    parts: list[Part] = []
    if batch.verdicts:
        parts.append((_INSERT_VERDICTS, verdict_arrays(batch.verdicts)))
    if batch.escalations:
        parts.append((INSERT_REVIEW_ITEMS, review_item_arrays(batch.escalations)))
    if batch.dead_letters:
        d = batch.dead_letters
        parts.append(
            (
                _INSERT_DEAD_LETTERS,
                [
                    *position_arrays(x.position for x in d),
                    [x.reason_code for x in d],
                    [x.reason for x in d],
                    [x.value_bytes for x in d],
                    [x.tenant for x in d],
                ],
            )
        )
    if batch.pending_texts:
        parts.append((INSERT_PENDING_TEXTS, pending_text_arrays(batch.pending_texts)))
    if batch.offsets:
        keys = sorted(batch.offsets)  # fixed lock order between concurrent batches
        parts.append(
            (
                _UPSERT_OFFSETS,
                [
                    consumer_group,
                    [k[0] for k in keys],
                    [k[1] for k in keys],
                    [batch.offsets[k] for k in keys],
                ],
            )
        )
    return parts


class VerdictBatchStore:
    """Writes verdict batches with the consumer group's offsets, and reads the offsets back.

    ``marks``: the published marks each write carries (``None``: writes carry none).
    """

    def __init__(
        self, database: Database, consumer_group: str, marks: CarriedMarks | None = None
    ) -> None:
        self._database = database
        self._group = consumer_group
        self._marks = marks

    async def write(self, batch: VerdictBatch, *, first: Sequence[Part] = ()) -> None:
        """Store the whole batch atomically, as one statement: the parts ``first`` (the online
        claims), the batch's inserts, then the mark of every row queued in ``marks``. Raise
        ``StoreUnavailable`` to be retried, or ``StoreError`` when Postgres or the driver
        refuses the data (not worth retrying; ``StoreConflict`` for a unique constraint). A
        write that fails marks nothing: its marks go with the next one."""
        parts = [*first, *batch_parts(batch, self._group)]
        marked = self._marks.take() if self._marks is not None else []
        if marked:
            parts.append(mark_part(marked))
        if not parts:
            return
        sql, args = one_statement(parts)
        try:
            await self._database.pool().execute(sql, *args)
        except STORE_DRIVER_ERRORS as exc:
            self._put_back(marked)
            raise store_failure(exc, "write") from exc
        except BaseException:
            self._put_back(marked)
            raise

    def _put_back(self, marked: list[VerdictRowKey]) -> None:
        if self._marks is not None:
            self._marks.put_back(marked)

    async def ensure_partitions(self) -> None:
        """Create the months of ``verdicts`` partitions that writes will need (at start)."""
        await ensure_verdict_partitions(self._database)

    async def stored_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Next offset to read for each partition that has one stored."""
        pool = self._database.pool()
        try:
            rows = await pool.fetch(_SELECT_OFFSETS, self._group, topic, list(partitions))
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"offset read failed: {type(exc).__name__}") from exc
        return {int(r["partition"]): int(r["next_offset"]) for r in rows}
