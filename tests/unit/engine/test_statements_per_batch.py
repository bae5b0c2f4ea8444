"""One PostgreSQL statement per batch: the stream's processor, wired by the real builder over a
pool that records every statement, writes each batch and marks the one before in one statement."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.batcher import Batch
from engine.inference import InferenceResult
from engine.offsets import OffsetTracker
from engine.parts import ModerationParts, build_parts, build_processor
from engine.processing import BatchProcessor
from engine.stores.carried_marks import CarriedMarks
from engine.stores.database import Database, StoreUnavailable
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from engine.work import Work
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict_codec import VerdictRowKey
from worker.settings import WorkerSettings

TOPIC = "chat.messages"
SENT_AT = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))
BATCH = 4


class RecordingPool:
    """The pool as the stores use it: every ``execute`` is one statement, recorded."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, tuple[Any, ...]]] = []
        self.refuse_next = 0
        """Statements still to answer with a lost connection (PostgreSQL away)."""

    async def execute(self, sql: str, *args: Any) -> str:
        if self.refuse_next > 0:
            self.refuse_next -= 1
            raise ConnectionResetError("connection reset by peer")
        self.statements.append((sql, args))
        return "INSERT 0 1"

    def marked(self, index: int) -> list[int]:
        """The offsets statement ``index`` marks published (empty: it marks nothing)."""
        sql, args = self.statements[index]
        if "UPDATE verdicts" not in sql:
            return []
        # The mark is the statement's last part: its last four arguments.
        _topics, _partitions, offsets, _sent_at = args[-4:]
        return list(offsets)


class RecordingDatabase(Database):
    """A started database whose pool is a :class:`RecordingPool`."""

    def __init__(self, pool: RecordingPool) -> None:
        self._recording = pool

    def pool(self) -> Any:
        return self._recording


class Kafka:
    """Publisher and acknowledger of the stream, recording what was published."""

    def __init__(self) -> None:
        self.published: list[bytes] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.published.extend(value for _, value in records)

    async def dead_letter(
        self, value: bytes | None, key: bytes | None, position: SourcePosition, *reason: str
    ) -> None:
        raise AssertionError("no dead letters in these tests")

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        return None


class Model:
    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        return InferenceResult([CALM] * len(texts), "moderation", "1", 2.0)


@dataclasses.dataclass
class Stream:
    parts: ModerationParts
    processor: BatchProcessor
    pool: RecordingPool
    tracker: OffsetTracker
    kafka: Kafka

    async def batch(self, first_offset: int) -> None:
        """One model batch of ``BATCH`` records, from ``first_offset``."""
        works = [_work(self.tracker, first_offset + i) for i in range(BATCH)]
        await self.processor.process_model_batch(Batch(works, 0.0, "full"))


def _work(tracker: OffsetTracker, offset: int) -> Work:
    tracker.start((TOPIC, 0), offset)
    message = ChatMessage(f"m-{offset}", "g-1", "u-1", f"hello number {offset}", SENT_AT)
    return Work(
        SourcePosition(TOPIC, 0, offset),
        b"g-1",
        0.0,
        message=message,
        outcome=RuleOutcome(),
        model_text=message.text,
    )


def _stream() -> Stream:
    """The stream's processor as ``build_stream_parts`` makes it, over a recording pool."""
    settings = WorkerSettings()
    pool = RecordingPool()
    kafka = Kafka()
    parts = build_parts(settings, consumer_group="g")
    # Every store of the parts holds this one Database: its pool is the recording one.
    parts.database.pool = lambda: pool  # type: ignore[method-assign]
    parts = dataclasses.replace(parts, publisher=kafka)
    tracker = OffsetTracker()
    processor = build_processor(
        parts, settings, acknowledger=kafka, positions=tracker, inference=Model()
    )
    return Stream(parts, processor, pool, tracker, kafka)


async def test_each_batch_is_one_statement_that_marks_the_batch_before() -> None:
    """Three batches, three statements: each stores its batch and its offsets, and the second
    and third also mark the batch before published. Sending marks alone (the stream before)
    would be six."""
    stream = _stream()
    for first in (0, BATCH, 2 * BATCH):
        await stream.batch(first)
    assert len(stream.pool.statements) == 3
    assert all("INSERT INTO verdicts" in sql for sql, _ in stream.pool.statements)
    assert all("INSERT INTO consumer_offsets" in sql for sql, _ in stream.pool.statements)
    assert stream.pool.marked(0) == []
    assert stream.pool.marked(1) == [0, 1, 2, 3]
    assert stream.pool.marked(2) == [4, 5, 6, 7]
    assert len(stream.kafka.published) == 3 * BATCH
    assert stream.parts.marks.sent_alone == 0


async def test_marks_no_write_carries_go_alone_once_the_batches_are_done() -> None:
    """The last batch's mark has no write after it: the marks loop sends it alone when the
    stream is done, as the fourth statement, and nothing is queued after."""
    stream = _stream()
    for first in (0, BATCH, 2 * BATCH):
        await stream.batch(first)
    done = asyncio.Event()
    done.set()
    await stream.parts.marks.run(done)
    assert len(stream.pool.statements) == 4
    sql, _ = stream.pool.statements[3]
    assert "INSERT" not in sql
    assert stream.pool.marked(3) == [8, 9, 10, 11]
    assert stream.parts.marks.sent_alone == 1
    assert stream.parts.marks.take() == []


async def test_a_retried_write_still_carries_the_marks_and_marks_nothing_twice() -> None:
    """PostgreSQL drops the second batch's statement: the retry is again one statement, with
    the first batch's mark; the lost attempt marked nothing."""
    stream = _stream()
    await stream.batch(0)
    stream.pool.refuse_next = 1
    await stream.batch(BATCH)
    assert len(stream.pool.statements) == 2
    assert stream.pool.marked(1) == [0, 1, 2, 3]
    assert stream.parts.marks.sent_alone == 0


def _key(offset: int) -> VerdictRowKey:
    return SourcePosition(TOPIC, 0, offset), SENT_AT


class Outbox:
    """The outbox as the marks send a lone mark."""

    def __init__(self) -> None:
        self.marked: list[list[VerdictRowKey]] = []

    async def mark_published(self, keys: Sequence[VerdictRowKey]) -> None:
        self.marked.append(list(keys))


async def test_the_claims_go_first_and_the_marks_last_in_the_one_statement() -> None:
    """``first`` parts (the online claims) open the statement, the marks close it."""
    pool = RecordingPool()
    database = RecordingDatabase(pool)
    marks = CarriedMarks(Outbox(), wait_s=60.0)
    await marks.mark_published([_key(1)])
    claims = ("INSERT INTO online_messages (message_id) SELECT * FROM unnest($1::text[])", [["m"]])
    await VerdictBatchStore(database, "g", marks).write(VerdictBatch(), first=[claims])
    [(sql, args)] = pool.statements
    assert sql.index("online_messages") < sql.index("UPDATE verdicts")
    assert args[0] == ["m"]
    assert pool.marked(0) == [1]


async def test_a_failed_write_queues_its_marks_for_the_next() -> None:
    """The statement that carried the marks failed: they are queued again, not lost."""
    pool = RecordingPool()
    pool.refuse_next = 1
    database = RecordingDatabase(pool)
    marks = CarriedMarks(Outbox(), wait_s=60.0)
    store = VerdictBatchStore(database, "g", marks)
    await marks.mark_published([_key(1), _key(2)])
    with pytest.raises(StoreUnavailable):
        await store.write(VerdictBatch(offsets={(TOPIC, 0): 3}))
    assert marks.take() == [_key(1), _key(2)]


async def test_the_marks_loop_sends_overdue_marks_while_the_stream_is_idle() -> None:
    """With no write coming, a queued mark goes alone within about ``wait_s``."""
    outbox = Outbox()
    marks = CarriedMarks(outbox, wait_s=0.01)
    done = asyncio.Event()
    loop = asyncio.create_task(marks.run(done))
    await marks.mark_published([_key(1)])
    for _ in range(200):
        if outbox.marked:
            break
        await asyncio.sleep(0.01)
    assert outbox.marked == [[_key(1)]]
    done.set()
    await asyncio.wait_for(loop, 1.0)
    assert marks.sent_alone == 1


async def test_the_outbox_store_sends_a_mark_as_a_statement_of_its_own() -> None:
    """``VerdictOutboxStore`` (the relay, the re-scorer, the lone marks) marks in one UPDATE."""
    pool = RecordingPool()
    database = RecordingDatabase(pool)
    await VerdictOutboxStore(database).mark_published([_key(5)])
    assert pool.marked(0) == [5]
    assert pool.statements[0][0].lstrip().startswith("UPDATE verdicts")
