"""Online source coordinates: one offset per ``message_id``, and the verdict stored there.

``online_messages`` (migration 0040) maps a message id to the offset its verdict row has in
``verdicts`` (source_topic ``online``, partition 0, offset from the sequence ``online_offsets``).
The first call claims it; every later call, concurrent or not and on any instance, reads the same
claim, so all of them address the same row, whose insert is idempotent.

Concurrent claims are made together (``online.coalesce``): one statement inserts all of them, a
second reads back the ones claimed before, only when there are any. Ids are inserted in sorted
order, so two instances claiming overlapping groups cannot deadlock; an id asked for twice in
one group is claimed once, and its later askers get the claim as not ``fresh``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from online.coalesce import Coalescer
from pipelines.messages import SourcePosition
from worker.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable

__all__ = ["ONLINE_PARTITION", "ONLINE_TOPIC", "Claim", "ClaimStore"]

ONLINE_TOPIC = "online"
"""The ``source_topic`` of every online verdict (no Kafka topic bears this name)."""
ONLINE_PARTITION = 0

_CLAIM = """
INSERT INTO online_messages (message_id, source_offset, sent_at)
SELECT m.message_id, nextval('online_offsets'), m.sent_at
FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS m(message_id, sent_at, n)
ORDER BY m.n
ON CONFLICT (message_id) DO NOTHING
RETURNING message_id, source_offset, sent_at
"""

# A conflicting insert waits for the other transaction to end, so this next statement sees it.
_EXISTING = """
SELECT message_id, source_offset, sent_at FROM online_messages WHERE message_id = ANY($1::text[])
"""

_STORED_VERDICT = """
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       text_sha256, decision, decided_by, escalated, category, priority, reasons,
       rule_hits::text AS rule_hits, scores::text AS scores, model_name, model_version, batch_id,
       queue_ms, inference_ms, updated_at
FROM verdicts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3 AND sent_at = $4
"""


@dataclass(frozen=True, slots=True)
class Claim:
    """Where a message's verdict lives; ``fresh`` when this call made the claim."""

    position: SourcePosition
    sent_at: datetime
    fresh: bool


def _claim(row: Any, fresh: bool) -> Claim:
    position = SourcePosition(ONLINE_TOPIC, ONLINE_PARTITION, int(row["source_offset"]))
    return Claim(position, row["sent_at"], fresh)


class ClaimStore:
    """Claims message ids and reads their stored verdicts back."""

    def __init__(self, database: Database, *, max_items: int = 256, max_in_flight: int = 1) -> None:
        self._database = database
        self._claims: Coalescer[tuple[str, datetime], Claim] = Coalescer(
            self.claim_many, max_items=max_items, max_in_flight=max_in_flight
        )

    async def claim(self, message_id: str, sent_at: datetime) -> Claim:
        """The message's coordinates: new ones for a first call, the stored ones otherwise
        (made together with the other calls' claims of the moment)."""
        return await self._claims((message_id, sent_at))

    async def claim_many(self, wanted: Sequence[tuple[str, datetime]]) -> list[Claim]:
        """The claims of ``(message_id, sent_at)`` pairs, in their order: one insert statement,
        and one read for the ids claimed before, if any."""
        first: dict[str, datetime] = {}
        for message_id, sent_at in wanted:
            first.setdefault(message_id, sent_at)
        ids = sorted(first)
        pool = self._database.pool()
        try:
            rows = await pool.fetch(_CLAIM, ids, [first[i] for i in ids])
            made = {row["message_id"]: _claim(row, True) for row in rows}
            if len(made) < len(ids):
                before = [i for i in ids if i not in made]
                for row in await pool.fetch(_EXISTING, before):
                    made[row["message_id"]] = _claim(row, False)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"claim failed: {type(exc).__name__}") from exc
        claims: list[Claim] = []
        answered: set[str] = set()
        for message_id, _ in wanted:
            claim = made.get(message_id)
            if claim is None:  # only if the claim was deleted in between (never by modstream)
                raise StoreUnavailable("claim vanished; retry")
            if message_id in answered:
                claim = Claim(claim.position, claim.sent_at, fresh=False)
            answered.add(message_id)
            claims.append(claim)
        return claims

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
