"""engine.stores.carried_marks under the online write, against the real PostgreSQL: a published
mark rides on the next verdict write, is queued again when that write fails, and is sent alone
when no write comes."""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from common.settings import PostgresSettings
from engine.stores.carried_marks import CarriedMarks
from engine.stores.database import Database, StoreError
from engine.stores.partitions import ensure_verdict_partitions
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from online.claimed_writes import ClaimedWrites
from online.claims import ClaimStore, online_position
from pipelines.messages import ChatMessage
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.verdict import Verdict
from pipelines.verdict_codec import verdict_row_key
from pipelines.verdict_factory import NO_MODEL, MessageFacts, make_verdict

pytestmark = pytest.mark.integration

SENT_AT = datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True, slots=True)
class Scratch:
    """The session database, with message ids and offsets of this test's own."""

    db: Database
    prefix: str
    base: int

    def verdict(self, offset: int) -> Verdict:
        message = ChatMessage(f"{self.prefix}{offset}", "g-1", "u-1", "hello there", SENT_AT)
        facts = MessageFacts.of(online_position(self.base + offset), message)
        return make_verdict(facts, RuleOutcome(), None, PolicyThresholds(), NO_MODEL, queue_ms=0.0)

    async def published(self) -> dict[int, bool]:
        """``published`` of this test's rows, by offset from ``base``."""
        rows = await self.db.pool().fetch(
            "SELECT source_offset, published FROM verdicts WHERE source_topic = 'online' "
            "AND source_offset BETWEEN $1 AND $1 + 999",
            self.base,
        )
        return {int(r["source_offset"]) - self.base: bool(r["published"]) for r in rows}


@pytest.fixture
async def scratch(database: str) -> AsyncIterator[Scratch]:
    """Offsets far above what ``online_offsets`` hands out in a session; rows deleted after."""
    base = 9_000_000_000 + random.randrange(1_000_000) * 1000
    async with Database(PostgresSettings(dsn=SecretStr(database))) as db:
        await ensure_verdict_partitions(db)
        yield Scratch(db, f"cm-{uuid.uuid4().hex[:8]}-", base)
        await db.pool().execute(
            "DELETE FROM verdicts WHERE source_topic = 'online' "
            "AND source_offset BETWEEN $1 AND $1 + 999",
            base,
        )
        await db.pool().execute("DELETE FROM online_messages WHERE message_id LIKE $1", "cm-%")


def _stores(scratch: Scratch) -> tuple[CarriedMarks, ClaimedWrites]:
    marks = CarriedMarks(VerdictOutboxStore(scratch.db), wait_s=60.0)
    return marks, ClaimedWrites(
        VerdictBatchStore(scratch.db, "online", marks), ClaimStore(scratch.db)
    )


async def test_a_mark_rides_on_the_next_write(scratch: Scratch) -> None:
    """Rows 1 and 2 published and marked; the mark waits for row 3's write, which stores row 3
    unpublished and marks 1 and 2, with no statement of the mark's own."""
    marks, writes = _stores(scratch)
    first = [scratch.verdict(1), scratch.verdict(2)]
    await writes.write(VerdictBatch(first))
    await marks.mark_published([verdict_row_key(v) for v in first])
    assert await scratch.published() == {1: False, 2: False}
    await writes.write(VerdictBatch([scratch.verdict(3)]))
    assert await scratch.published() == {1: True, 2: True, 3: False}
    assert marks.sent_alone == 0
    assert marks.take() == []


async def test_a_failed_write_queues_its_marks_again(scratch: Scratch) -> None:
    """A write PostgreSQL refuses marks nothing; its marks go with the next write."""
    marks, writes = _stores(scratch)
    first = scratch.verdict(1)
    await writes.write(VerdictBatch([first]))
    await marks.mark_published([verdict_row_key(first)])
    refused = scratch.verdict(2)
    bad = VerdictBatch([dataclasses.replace(refused, group_id="bad\x00group")])
    with pytest.raises(StoreError):
        await writes.write(bad)
    assert await scratch.published() == {1: False}
    await writes.write(VerdictBatch([scratch.verdict(3)]))
    assert await scratch.published() == {1: True, 3: False}


async def test_marks_no_write_takes_are_sent_alone(scratch: Scratch) -> None:
    """Without a write to carry them, overdue marks and, at the end, all marks go alone."""
    clock = [0.0]
    marks = CarriedMarks(VerdictOutboxStore(scratch.db), wait_s=0.05, clock=lambda: clock[0])
    writes = ClaimedWrites(VerdictBatchStore(scratch.db, "online", marks), ClaimStore(scratch.db))
    rows = [scratch.verdict(1), scratch.verdict(2)]
    await writes.write(VerdictBatch(rows))
    await marks.mark_published([verdict_row_key(rows[0])])
    await marks.send_overdue()
    assert await scratch.published() == {1: False, 2: False}  # not waited long enough
    clock[0] = 0.06
    await marks.send_overdue()
    assert await scratch.published() == {1: True, 2: False}
    await marks.mark_published([verdict_row_key(rows[1])])
    await marks.send_alone()
    assert await scratch.published() == {1: True, 2: True}
    assert marks.sent_alone == 2
