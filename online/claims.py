"""Online source coordinates: offsets for new checks, and the claims of message ids stored before.

``online_messages`` (migration 0040) maps a message id to the offset its verdict row has in
``verdicts`` (source_topic ``online``, partition 0, offset from the sequence ``online_offsets``).
A claim is stored by the statement that stores its verdict (``online.claimed_writes``), so a claim
always has its row and a row its claim. This module gives a new check its coordinates before the
verdict exists, and answers where the verdict of a message id seen before lives:

- :meth:`ClaimStore.reserve` hands out offsets from blocks taken from ``online_offsets`` by one
  statement each (``reserve_block`` at a time): a check costs no round trip here. An offset whose
  check stores nothing (a repeat that lost to an earlier claim, a failure, a restart) is skipped
  for good, as a sequence's values are whenever a transaction does not keep them.
- :meth:`ClaimStore.claimed` reads the stored claims of message ids, and :meth:`ClaimStore.recent`
  knows, without a query, the claims this process stored or read lately (``recent_items`` of
  them). A claim never changes once stored, so knowing it is knowing where the one verdict of
  that message id is; what the row holds is always read from PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable
from pipelines.messages import SourcePosition

__all__ = ["ONLINE_PARTITION", "ONLINE_TOPIC", "Claim", "ClaimStore", "online_position"]

ONLINE_TOPIC = "online"
"""The ``source_topic`` of every online verdict (no Kafka topic bears this name)."""
ONLINE_PARTITION = 0

_RESERVE = "SELECT nextval('online_offsets') AS source_offset FROM generate_series(1, $1)"

_CLAIMED = """
SELECT message_id, source_offset, sent_at FROM online_messages WHERE message_id = ANY($1::text[])
"""

_STORED_VERDICT = """
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       text_sha256, decision, decided_by, escalated, category, priority, reasons,
       rule_hits::text AS rule_hits, scores::text AS scores, model_name, model_version, batch_id,
       queue_ms, inference_ms, model_spans::text AS model_spans, updated_at, tenant
FROM verdicts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3 AND sent_at = $4
"""


def online_position(offset: int) -> SourcePosition:
    """The coordinates of the online verdict at ``offset``."""
    return SourcePosition(ONLINE_TOPIC, ONLINE_PARTITION, offset)


@dataclass(frozen=True, slots=True)
class Claim:
    """Where the verdict of a message id lives: its coordinates and the first call's
    ``sent_at`` (part of the row's key: ``verdicts`` is partitioned on it)."""

    position: SourcePosition
    sent_at: datetime


class ClaimStore:
    """Offsets for new checks, and the stored claims of message ids."""

    def __init__(
        self, database: Database, *, reserve_block: int = 256, recent_items: int = 50_000
    ) -> None:
        if reserve_block < 1 or recent_items < 1:
            raise ValueError("reserve_block and recent_items must be >= 1")
        self._database = database
        self._block = reserve_block
        self._free: deque[int] = deque()
        self._refill = asyncio.Lock()
        self._recent_items = recent_items
        self._recent: OrderedDict[str, Claim] = OrderedDict()

    async def reserve(self) -> SourcePosition:
        """Coordinates no other check has or will have (``StoreUnavailable`` when a new block
        is needed and PostgreSQL cannot give one)."""
        if not self._free:
            async with self._refill:
                if not self._free:
                    self._free.extend(await self._take_block())
        return online_position(self._free.popleft())

    async def _take_block(self) -> list[int]:
        try:
            rows = await self._database.pool().fetch(_RESERVE, self._block)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"offset reservation failed: {type(exc).__name__}") from exc
        return [int(row["source_offset"]) for row in rows]

    def recent(self, message_id: str) -> Claim | None:
        """The claim of ``message_id`` if this process stored or read it lately (no query)."""
        return self._recent.get(message_id)

    def remember(self, claims: Iterable[tuple[str, Claim]]) -> None:
        """Note stored claims (``message_id``, claim); past ``recent_items`` the ones noted
        longest ago are forgotten."""
        recent = self._recent
        for message_id, claim in claims:
            recent[message_id] = claim
            recent.move_to_end(message_id)
        while len(recent) > self._recent_items:
            recent.popitem(last=False)

    async def claimed(self, message_ids: Sequence[str]) -> dict[str, Claim]:
        """The stored claims of ``message_ids`` (ids never claimed are left out)."""
        if not message_ids:
            return {}
        try:
            rows = await self._database.pool().fetch(_CLAIMED, list(message_ids))
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"claim read failed: {type(exc).__name__}") from exc
        found = {
            str(r["message_id"]): Claim(online_position(int(r["source_offset"])), r["sent_at"])
            for r in rows
        }
        self.remember(found.items())
        return found

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
