"""Faults the chaos suite cannot stage cheaply, against the real PostgreSQL: data refusals."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg
import pytest
from pydantic import SecretStr

from common.settings import PostgresSettings
from engine.batcher import Batch
from engine.inference import InferenceResult
from engine.metrics import Metrics
from engine.offsets import OffsetTracker
from engine.policy_stage import PolicyStage
from engine.processing import BatchProcessor
from engine.stores.database import Database, StoreError, StoreUnavailable
from engine.stores.partitions import ensure_verdict_partitions
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from engine.work import Work
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import Verdict
from pipelines.verdict_factory import NO_MODEL, MessageFacts, make_verdict

CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))
UNENCODABLE = "id-\ud800"
"""A lone surrogate: a Python ``str`` the driver cannot encode as UTF-8 (client-side refusal)."""


class _Model:
    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        return InferenceResult([CALM] * len(texts), "moderation", "1", 1.0)


class _Kafka:
    """Verdict publisher and acknowledger that only count."""

    def __init__(self) -> None:
        self.published = 0

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.published += len(records)

    async def dead_letter(
        self, value: bytes | None, key: bytes | None, position: SourcePosition, *reason: str
    ) -> None:
        raise AssertionError("only model batches here")

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        return None


def _work(tracker: OffsetTracker, topic: str, offset: int, message_id: str) -> Work:
    tracker.start((topic, 0), offset)
    message = ChatMessage(message_id, "g", "u", f"hello {offset}", datetime.now(UTC))
    return Work(
        SourcePosition(topic, 0, offset),
        b"g",
        0.0,
        message=message,
        outcome=RuleOutcome(),
        model_text=message.text,
    )


def _rules_only(work: Work) -> Verdict:
    assert work.message is not None
    facts = MessageFacts.of(work.position, work.message)
    return make_verdict(facts, RuleOutcome(), None, PolicyThresholds(), NO_MODEL, queue_ms=0.0)


async def test_unencodable_value_is_a_rejection_from_the_real_driver(database: str) -> None:
    """asyncpg refusing to encode a value (before the server sees it) is a StoreError."""
    settings = PostgresSettings(dsn=SecretStr(database))
    topic = f"faults.{uuid.uuid4().hex[:8]}"
    tracker = OffsetTracker()
    async with Database(settings) as db:
        await ensure_verdict_partitions(db)
        store = VerdictBatchStore(db, "faults")
        processor = BatchProcessor(
            inference=_Model(),
            store=store,
            outbox=VerdictOutboxStore(db),
            publisher=_Kafka(),
            acknowledger=_Kafka(),
            positions=tracker,
            policy=PolicyStage(PolicyThresholds()),
            verdict_topic="unused",
            metrics=Metrics(),
            give_up=asyncio.Event(),
        )
        bad = _work(tracker, topic, 0, UNENCODABLE)
        with pytest.raises(StoreError) as raised:
            await store.write(VerdictBatch([_rules_only(bad)]))
        assert not isinstance(raised.value, StoreUnavailable)
        works = [_work(tracker, topic, 1, "m-1"), bad, _work(tracker, topic, 2, "m-2")]
        await asyncio.wait_for(processor.process_model_batch(Batch(works, 0.0, "full")), 30.0)
    conn = await asyncpg.connect(database)
    try:
        ids = await conn.fetch("SELECT message_id FROM verdicts WHERE source_topic = $1", topic)
        letters = await conn.fetch(
            "SELECT source_offset, reason_code, reason FROM dead_letters WHERE source_topic = $1",
            topic,
        )
        stored = await conn.fetchval(
            "SELECT next_offset FROM consumer_offsets WHERE topic = $1", topic
        )
    finally:
        await conn.close()
    assert sorted(r["message_id"] for r in ids) == ["m-1", "m-2"]
    assert [(r["source_offset"], r["reason_code"]) for r in letters] == [(0, "sink_rejected")]
    assert "\ud800" not in letters[0]["reason"]
    assert stored == 3
