"""Verdict rows as an outbox: those not yet published, and marking them published.

A ``verdicts`` row carries ``published``: false when stored, true once Kafka acknowledged its
record. The re-scorer and the relay mark what they published here, each mark a statement of its
own; the stream and the online service carry theirs on their next verdict write instead
(``engine.stores.carried_marks``), and send here only what no write carried. The outbox relay
reads what is still unpublished after a while and sends it again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from engine.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable
from engine.stores.published_marks import mark_part
from pipelines.verdict_codec import VerdictRowKey

__all__ = ["VerdictOutboxStore"]

_SELECT_UNPUBLISHED = """
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits::text AS rule_hits,
       scores::text AS scores, sentiment_label, intent_label, toxicity_label, model_name,
       model_version, batch_id, model_spans::text AS model_spans, created_at, updated_at, tenant
FROM verdicts
WHERE NOT published
  AND updated_at < now() - make_interval(secs => $1)
  AND ($2::text IS NULL OR source_topic = $2)
  AND ($3::int[] IS NULL OR source_partition = ANY($3))
  AND ($5::uuid IS NULL OR rescan_id = $5)
ORDER BY created_at
LIMIT $4
"""


class VerdictOutboxStore:
    """The unpublished side of ``verdicts``."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def mark_published(self, keys: Sequence[VerdictRowKey]) -> None:
        """Mark the rows of ``keys`` published (rows already marked are left alone)."""
        if not keys:
            return
        sql, args = mark_part(keys)
        pool = self._database.pool()
        try:
            await pool.execute(sql, *args)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"mark published failed: {type(exc).__name__}") from exc

    async def unpublished(
        self,
        min_age_s: float,
        limit: int,
        topic: str | None = None,
        partitions: Sequence[int] | None = None,
        rescan_id: uuid.UUID | None = None,
    ) -> list[dict[str, Any]]:
        """Verdict rows not marked published for at least ``min_age_s``, oldest first (only
        those rescan ``rescan_id`` changed, when given)."""
        pool = self._database.pool()
        try:
            rows = await pool.fetch(
                _SELECT_UNPUBLISHED,
                float(min_age_s),
                topic,
                list(partitions) if partitions is not None else None,
                limit,
                rescan_id,
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"unpublished read failed: {type(exc).__name__}") from exc
        return [dict(r) for r in rows]
