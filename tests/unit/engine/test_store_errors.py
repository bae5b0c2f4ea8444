"""Tests for how the stores classify driver errors: outage (retry) or rejection (isolate)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from asyncpg.exceptions import _base as asyncpg_base

import engine.processing as processing_module
from engine.batcher import Batch
from engine.inference import InferenceResult
from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey
from engine.policy_stage import PolicyStage
from engine.processing import BatchProcessor
from engine.stores.database import Database, StoreError, StoreUnavailable
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.work import Work
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores

TOPIC = "chat.messages"
VERDICT_TOPIC = "moderation.verdicts"
KEY0: PartitionKey = (TOPIC, 0)
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))

CLIENT_REJECTIONS: list[BaseException] = [
    asyncpg_base.DataError("invalid input for query argument $5"),
    asyncpg_base.ClientConfigurationError("bad codec configuration"),
    asyncpg_base.UnsupportedClientFeatureError("feature not supported"),
    asyncpg.exceptions.DataError("invalid input for query argument $5"),
]
OUTAGES: list[BaseException] = [
    OSError("connection refused"),
    TimeoutError(),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
    asyncpg.exceptions.InterfaceError("cannot perform operation: connection is closed"),
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    # Seen in chaos scenario 3: the server shut down mid-operation and the protocol's state
    # machine refused the next step. A fresh connection works: an outage, not a rejection.
    asyncpg.exceptions.InternalClientError("cannot switch to state 12; another operation"),
]


class _Inference:
    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        return InferenceResult([CALM] * len(texts), "moderation", "1", 1.0)


class _Kafka:
    """Publisher, acknowledger and published-marker at once; records what it is given."""

    def __init__(self) -> None:
        self.records: list[bytes] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.records.extend(value for _, value in records)

    async def dead_letter(
        self, value: bytes | None, key: bytes | None, position: SourcePosition, *reason: str
    ) -> None:
        raise AssertionError("decided batches are not part of these tests")

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        return None

    async def mark_published(self, keys: Sequence[Any]) -> None:
        return None


def _work(tracker: OffsetTracker, offset: int, message_id: str) -> Work:
    tracker.start(KEY0, offset)
    message = ChatMessage(
        message_id, "g1", "u1", f"hello {offset}", datetime(2026, 12, 3, tzinfo=UTC)
    )
    return Work(
        SourcePosition(TOPIC, 0, offset),
        b"g1",
        0.0,
        message=message,
        outcome=RuleOutcome(),
        model_text=message.text,
    )


class _Conn:
    """A connection whose ``execute`` raises ``error`` when ``poisoned`` says so."""

    def __init__(self, error: BaseException, poisoned: Any) -> None:
        self.error = error
        self.poisoned = poisoned
        self.executed = 0

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield

    async def execute(self, sql: str, *args: Any) -> str:
        if self.poisoned(args):
            raise self.error
        self.executed += 1
        return "INSERT 0 1"


class _Pool:
    def __init__(self, conn: _Conn) -> None:
        self.conn = conn

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[_Conn]:
        yield self.conn

    async def execute(self, sql: str, *args: Any) -> str:
        """The batch write is one statement on the pool itself."""
        return await self.conn.execute(sql, *args)


class _Database(Database):
    """A started Database whose pool is a fake that raises a chosen driver error."""

    def __init__(self, conn: _Conn) -> None:
        self._fake = _Pool(conn)

    def pool(self) -> Any:
        return self._fake


def _store(error: BaseException, poisoned: Any = lambda args: True) -> VerdictBatchStore:
    return VerdictBatchStore(_Database(_Conn(error, poisoned)), "g")


@pytest.mark.parametrize("error", CLIENT_REJECTIONS, ids=lambda e: type(e).__name__)
async def test_client_side_rejection_is_a_store_error_not_an_outage(error: BaseException) -> None:
    """A client-side data error from the driver becomes a non-retriable StoreError."""
    with pytest.raises(StoreError) as raised:
        await _store(error).write(VerdictBatch(offsets={KEY0: 1}))
    assert not isinstance(raised.value, StoreUnavailable)
    assert not raised.value.retriable
    assert "query argument" not in str(raised.value)  # the driver's text may quote a value


@pytest.mark.parametrize("error", OUTAGES, ids=lambda e: type(e).__name__)
async def test_connection_loss_is_still_an_outage(error: BaseException) -> None:
    """Errors meaning Postgres is away stay StoreUnavailable, to be retried."""
    with pytest.raises(StoreUnavailable):
        await _store(error).write(VerdictBatch(offsets={KEY0: 1}))


async def test_client_side_rejection_isolates_the_batch_instead_of_retrying_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row the driver cannot encode is dead-lettered and the rest stored, within seconds."""
    monkeypatch.setattr(processing_module, "backoff_s", lambda *_a, **_k: 0.0)
    tracker = OffsetTracker()

    def poisoned(args: tuple[Any, ...]) -> bool:
        return any(isinstance(a, list) and "bad-1" in a for a in args)

    conn = _Conn(asyncpg_base.DataError("invalid input for query argument $5"), poisoned)
    store = VerdictBatchStore(_Database(conn), "g")
    kafka = _Kafka()
    processor = BatchProcessor(
        inference=_Inference(),
        store=store,
        outbox=kafka,
        publisher=kafka,
        acknowledger=kafka,
        positions=tracker,
        policy=PolicyStage(PolicyThresholds()),
        verdict_topic=VERDICT_TOPIC,
        metrics=Metrics(),
        give_up=asyncio.Event(),
    )
    works = [_work(tracker, 0, "m-0"), _work(tracker, 1, "bad-1"), _work(tracker, 2, "m-2")]
    await asyncio.wait_for(processor.process_model_batch(Batch(works, 0.0, "full")), 5.0)
    assert tracker.durable_point(KEY0) == 3
    assert processor.store_healthy
    assert len(kafka.records) == 2
    assert conn.executed >= 3
