"""Online source coordinates: one offset per ``message_id``, and the verdict stored there.

``online_messages`` (migration 0040) maps a message id to the offset its verdict row has in
``verdicts`` (source_topic ``online``, partition 0, offset from the sequence ``online_offsets``).
The first call claims it; every later call, concurrent or not and on any instance, reads the same
claim, so all of them address the same row, whose insert is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipelines.messages import SourcePosition
from worker.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable

__all__ = ["ONLINE_PARTITION", "ONLINE_TOPIC", "Claim", "ClaimStore"]

ONLINE_TOPIC = "online"
"""The ``source_topic`` of every online verdict (no Kafka topic bears this name)."""
ONLINE_PARTITION = 0

_CLAIM = """
INSERT INTO online_messages (message_id, source_offset, sent_at)
VALUES ($1, nextval('online_offsets'), $2)
ON CONFLICT (message_id) DO NOTHING
RETURNING source_offset, sent_at
"""

# A conflicting insert waits for the other transaction to end, so this next statement sees it.
_EXISTING = "SELECT source_offset, sent_at FROM online_messages WHERE message_id = $1"

_STORED_VERDICT = """
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, escalated, category, priority, reasons, rule_hits::text AS rule_hits,
       scores::text AS scores, sentiment_label, intent_label, toxicity_label, model_name,
       model_version, batch_id, queue_ms, inference_ms, created_at, updated_at
FROM verdicts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3 AND sent_at = $4
"""


@dataclass(frozen=True, slots=True)
class Claim:
    """Where a message's verdict lives; ``fresh`` when this call made the claim."""

    position: SourcePosition
    sent_at: datetime
    fresh: bool


class ClaimStore:
    """Claims message ids and reads their stored verdicts back."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def claim(self, message_id: str, sent_at: datetime) -> Claim:
        """The message's coordinates: new ones for a first call, the stored ones otherwise."""
        pool = self._database.pool()
        try:
            row = await pool.fetchrow(_CLAIM, message_id, sent_at)
            fresh = row is not None
            if row is None:
                row = await pool.fetchrow(_EXISTING, message_id)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"claim failed: {type(exc).__name__}") from exc
        if row is None:  # only if the claim was deleted in between (never by modstream)
            raise StoreUnavailable("claim vanished; retry")
        position = SourcePosition(ONLINE_TOPIC, ONLINE_PARTITION, int(row["source_offset"]))
        return Claim(position, row["sent_at"], fresh)

    async def stored_verdict(
        self, position: SourcePosition, sent_at: datetime
    ) -> dict[str, Any] | None:
        """The verdict row at ``position`` (``None`` while nobody has stored it)."""
        pool = self._database.pool()
        try:
            row = await pool.fetchrow(
                _STORED_VERDICT, position.topic, position.partition, position.offset, sent_at
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"verdict read failed: {type(exc).__name__}") from exc
        return None if row is None else dict(row)

    async def ping(self) -> bool:
        """Whether PostgreSQL answers (the health service asks)."""
        try:
            pool = self._database.pool()
        except StoreUnavailable:
            return False
        try:
            return bool(await pool.fetchval("SELECT true"))
        except UNAVAILABLE_ERRORS:
            return False
