"""Outbox relay and ``modstream rescore`` against the real PostgreSQL, Kafka and Triton."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from pydantic import SecretStr

from engine.outbox import VerdictOutbox
from engine.publisher import KafkaPublisher
from engine.stores.database import Database
from engine.stores.pending_texts import PendingText
from engine.stores.verdict_batches import DeadLetter, VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleOutcome
from pipelines.verdict import Verdict
from tests.chaos.harness import ChaosEnv, Ledger, good_record
from tests.support import run_rescore
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration


def _pending_verdict(topic: str, offset: int, text: str) -> Verdict:
    result = decide(RuleOutcome(), None, PolicyThresholds(), model_available=False)
    return Verdict(
        position=SourcePosition(topic, 0, offset),
        message_id=f"rel-{offset}",
        group_id="g-rel",
        sender_id="u-rel",
        sent_at=datetime.now(UTC),
        text_sha256=hashlib.sha256(text.encode()).hexdigest(),
        rule_hits=(),
        scores=None,
        result=result,
        model_name=None,
        model_version=None,
        batch_id=None,
        queue_ms=1.0,
        inference_ms=None,
    )


async def _read_topic(bootstrap: str, topic: str, expected: int) -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while len(out) < expected and asyncio.get_running_loop().time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(orjson.loads(r.value) for r in records)
    finally:
        await consumer.stop()
    return out


async def _store(s: WorkerSettings, verdicts: list[Verdict], texts: list[str]) -> None:
    async with Database(s.postgres) as database:
        await VerdictBatchStore(database, s.kafka.group_id).write(
            VerdictBatch(
                verdicts,
                pending_texts=[
                    PendingText(v.position, v.sent_at, t)
                    for v, t in zip(verdicts, texts, strict=True)
                ],
            )
        )


async def test_outbox_relays_unpublished_rows_once_and_marks_them(
    worker_settings: WorkerSettings,
) -> None:
    """Rows stored but never published reach the verdict topic and are marked published; a
    second relay round finds nothing to send."""
    s = worker_settings
    topic = s.kafka.input_topic
    verdicts = [_pending_verdict(topic, i, f"hello {i}") for i in range(3)]
    await _store(s, verdicts, [f"hello {i}" for i in range(3)])
    async with (
        Database(s.postgres) as database,
        KafkaPublisher(s.kafka) as publisher,
    ):
        store = VerdictOutboxStore(database)
        outbox = VerdictOutbox(store, publisher, s.kafka.verdict_topic, min_age_s=0, batch_items=2)
        assert await outbox.relay_all(topic, [0]) == 3
        assert await outbox.relay_all(topic, [0]) == 0
    records = await _read_topic(s.kafka.bootstrap_servers, s.kafka.verdict_topic, 3)
    assert sorted(r["message_id"] for r in records) == ["rel-0", "rel-1", "rel-2"]
    conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
    try:
        unpublished = await conn.fetchval(
            "SELECT count(*) FROM verdicts WHERE source_topic = $1 AND NOT published", topic
        )
    finally:
        await conn.close()
    assert unpublished == 0


async def test_rescore_command_updates_pending_verdicts_in_place(
    worker_settings: WorkerSettings,
) -> None:
    """``modstream rescore`` turns pending_model rows into model verdicts (same row, model name
    and version set), deletes their stored texts and publishes the new verdicts."""
    s = worker_settings
    topic = s.kafka.input_topic
    texts = ["what a lovely day", "buy cheap followers now", "see you tomorrow"]
    verdicts = [_pending_verdict(topic, 100 + i, t) for i, t in enumerate(texts)]
    await _store(s, verdicts, texts)
    run = await run_rescore(s, topic)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "rescored=3" in run.stdout
    conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
    try:
        rows = await conn.fetch(
            "SELECT decided_by, model_name, scores IS NOT NULL AS scored FROM verdicts "
            "WHERE source_topic = $1",
            topic,
        )
        left = await conn.fetchval(
            "SELECT count(*) FROM pending_texts WHERE source_topic = $1", topic
        )
    finally:
        await conn.close()
    assert len(rows) == 3
    assert {(r["decided_by"], r["model_name"], r["scored"]) for r in rows} == {
        ("model", s.triton.model_name, True)
    }
    assert left == 0
    records = await _read_topic(s.kafka.bootstrap_servers, s.kafka.verdict_topic, 3)
    assert sorted(r["source_offset"] for r in records) == [100, 101, 102]
    assert {r["decided_by"] for r in records} == {"model"}


async def test_chaos_ledger_counts_a_lost_record_and_a_double_outcome(tmp_path: Path) -> None:
    """The chaos suite's ledger is not a rubber stamp: with one record given no outcome and
    another given both a verdict and a dead letter, it reports lost=1, duplicates=1 and the
    unpublished verdicts, and the result is not exact."""
    env = ChaosEnv(tmp_path)
    await env.create()
    try:
        topics = await env.new_topics("ledger")
        ledger = Ledger()
        rng = random.Random(3)
        records = [good_record("ledger", i, rng) for i in range(3)]
        await env.produce(topics, ledger, records)
        coords = sorted(ledger.expected)
        stored: list[Verdict] = []
        for partition, offset in coords[:2]:
            v = _pending_verdict(topics.input_topic, offset, "x")
            message_id = ledger.expected[(partition, offset)].message_id
            assert message_id is not None
            stored.append(
                dataclasses.replace(
                    v,
                    position=SourcePosition(topics.input_topic, partition, offset),
                    message_id=message_id,
                )
            )
        partition, offset = coords[0]
        letter = DeadLetter(SourcePosition(topics.input_topic, partition, offset), "x", "x", 1)
        settings = WorkerSettings().model_copy(
            update={
                "postgres": WorkerSettings().postgres.model_copy(update={"dsn": SecretStr(env.dsn)})
            }
        )
        async with Database(settings.postgres) as database:
            batches = VerdictBatchStore(database, topics.group_id)
            await batches.write(VerdictBatch(stored, dead_letters=[letter]))
        result = await ledger.check(env, topics)
    finally:
        await env.drop()
    assert (result.lost, result.duplicates, result.unpublished) == (1, 1, 2)
    assert result.misrouted == 1  # the dead letter for a good record
    assert not result.exact
