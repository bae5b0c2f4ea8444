"""online.claimed_writes against the real PostgreSQL: claims and verdicts stored by one statement,
a repeat refused by the claim key and left out, a rewritten batch idempotent, concurrent
overlapping writes of two instances one row per message id."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from common.settings import PostgresSettings
from engine.stores.database import Database
from engine.stores.partitions import ensure_verdict_partitions
from engine.stores.pending_texts import PendingText
from engine.stores.review_items import Escalation
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from online.claimed_writes import ClaimedWrites
from online.claims import ClaimStore, online_position
from pipelines.messages import ChatMessage
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.verdict import Verdict
from pipelines.verdict_factory import NO_MODEL, MessageFacts, make_verdict

pytestmark = pytest.mark.integration

SENT_AT = datetime.now(UTC).replace(microsecond=0)

_ROWS = {
    "verdicts": "SELECT source_offset FROM verdicts WHERE source_topic = 'online' "
    "AND source_offset BETWEEN $1 AND $1 + 999 ORDER BY 1",
    "review_items": "SELECT source_offset FROM review_items WHERE source_topic = 'online' "
    "AND source_offset BETWEEN $1 AND $1 + 999 ORDER BY 1",
    "pending_texts": "SELECT source_offset FROM pending_texts WHERE source_topic = 'online' "
    "AND source_offset BETWEEN $1 AND $1 + 999 ORDER BY 1",
}


@dataclass(frozen=True, slots=True)
class Scratch:
    """The session database, with message ids and offsets of this test's own."""

    db: Database
    prefix: str
    base: int

    def verdict(self, offset: int, message_id: str) -> Verdict:
        message = ChatMessage(self.prefix + message_id, "g-1", "u-1", "hello there", SENT_AT)
        facts = MessageFacts.of(online_position(self.base + offset), message)
        return make_verdict(facts, RuleOutcome(), None, PolicyThresholds(), NO_MODEL, queue_ms=0.0)

    def writes(self) -> ClaimedWrites:
        """The store of one service instance (its own claim memory)."""
        return ClaimedWrites(VerdictBatchStore(self.db, "online"), ClaimStore(self.db))

    async def offsets(self, table: str) -> list[int]:
        """Offsets (from ``base``) of this test's rows in ``table``."""
        rows = await self.db.pool().fetch(_ROWS[table], self.base)
        return [int(r["source_offset"]) - self.base for r in rows]

    async def claims(self) -> dict[str, int]:
        rows = await self.db.pool().fetch(
            "SELECT message_id, source_offset FROM online_messages WHERE message_id LIKE $1",
            self.prefix + "%",
        )
        return {
            str(r["message_id"]).removeprefix(self.prefix): int(r["source_offset"]) - self.base
            for r in rows
        }


def _batch(*verdicts: Verdict) -> VerdictBatch:
    return VerdictBatch(
        list(verdicts),
        [Escalation(v, "hello there") for v in verdicts],
        pending_texts=[PendingText(v.position, v.sent_at, "hello there") for v in verdicts],
    )


@pytest.fixture
async def scratch(database: str) -> AsyncIterator[Scratch]:
    """Offsets far above what ``online_offsets`` hands out in a session; rows deleted after."""
    base = 9_000_000_000 + random.randrange(1_000_000) * 1000
    async with Database(PostgresSettings(dsn=SecretStr(database))) as db:
        await ensure_verdict_partitions(db)
        yield Scratch(db, f"cw-{uuid.uuid4().hex[:8]}-", base)
        for table in _ROWS:
            await db.pool().execute(
                f"DELETE FROM {table} WHERE source_topic = 'online' "  # noqa: S608 (fixed names)
                "AND source_offset BETWEEN $1 AND $1 + 999",
                base,
            )


async def test_claims_and_verdicts_are_stored_by_one_write(scratch: Scratch) -> None:
    """Two new ids: both claimed at their verdicts' offsets, rows, escalations and texts kept."""
    stored = await scratch.writes().write(_batch(scratch.verdict(1, "b"), scratch.verdict(2, "a")))
    assert [v.position.offset - scratch.base for v in stored.verdicts] == [1, 2]
    assert await scratch.claims() == {"a": 2, "b": 1}
    for table in _ROWS:
        assert await scratch.offsets(table) == [1, 2], table


async def test_a_repeat_is_left_out_unstored_and_the_rest_of_its_batch_kept(
    scratch: Scratch,
) -> None:
    """A repeat at new coordinates (decided by an instance that did not know the id) makes
    PostgreSQL refuse the statement on the claim key; the batch is written again without it:
    no row, escalation or text at its offset, its claim unchanged, the new id stored."""
    await scratch.writes().write(_batch(scratch.verdict(1, "seen")))
    stored = await scratch.writes().write(
        _batch(scratch.verdict(5, "new"), scratch.verdict(6, "seen"))
    )
    assert [v.message_id for v in stored.verdicts] == [scratch.prefix + "new"]
    assert [e.verdict.position.offset - scratch.base for e in stored.escalations] == [5]
    assert await scratch.claims() == {"seen": 1, "new": 5}
    for table in _ROWS:
        assert await scratch.offsets(table) == [1, 5], table


async def test_a_batch_written_again_is_stored_once_and_returned_whole(scratch: Scratch) -> None:
    """The same batch twice (a retry after a commit whose answer was lost): the second write
    finds its own claims, stores nothing new and reports every verdict stored (so each is
    answered and published)."""
    batch = _batch(scratch.verdict(1, "x"), scratch.verdict(2, "y"))
    await scratch.writes().write(batch)
    again = await scratch.writes().write(batch)
    assert [v.position for v in again.verdicts] == [v.position for v in batch.verdicts]
    assert await scratch.claims() == {"x": 1, "y": 2}
    assert await scratch.offsets("verdicts") == [1, 2]


async def test_two_instances_writing_overlapping_ids_at_once_store_one_row_per_id(
    scratch: Scratch,
) -> None:
    """Ten rounds of two instances writing the same three ids (in opposite orders, at offsets
    of their own) at the same moment: no deadlock, one claim and one row per id, and what each
    write reports stored is exactly the rows at its offsets."""
    for round_ in range(10):
        ids = [f"r{round_}-{n}" for n in range(3)]
        one = _batch(*(scratch.verdict(round_ * 20 + n, m) for n, m in enumerate(ids)))
        two = _batch(
            *(scratch.verdict(round_ * 20 + 10 + n, m) for n, m in enumerate(reversed(ids)))
        )
        a, b = await asyncio.wait_for(
            asyncio.gather(scratch.writes().write(one), scratch.writes().write(two)), 30
        )
        reported = sorted(v.position.offset - scratch.base for v in [*a.verdicts, *b.verdicts])
        claims = await scratch.claims()
        assert sorted(m for m in claims if m.startswith(f"r{round_}-")) == sorted(ids)
        rows = [o for o in await scratch.offsets("verdicts") if round_ * 20 <= o < round_ * 20 + 20]
        assert rows == reported
        assert sorted(claims[m] for m in ids) == rows
