"""The stream's write path against the real Kafka, PostgreSQL and Triton: one statement per batch
write (verdicts, offsets and the previous batch's published marks together), and a worker
killed between a publish and its mark resumes losing nothing, storing nothing twice and
publishing again only the rows whose mark never landed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from engine.outbox import VerdictOutbox
from engine.parts import build_parts
from engine.publisher import KafkaPublisher
from engine.stores.database import Database
from engine.stores.verdict_outbox import VerdictOutboxStore
from stack.samples import produce, sample_stream
from tests.integration.conftest import wait_until
from worker.app import Worker
from worker.parts import build_stream_parts
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

RECORDS = 1500


@dataclass
class CountingPool:
    """The worker's pool, recording the SQL of every ``execute`` (each one statement)."""

    pool: Any
    statements: list[str] = field(default_factory=list)

    async def execute(self, sql: str, *args: Any) -> str:
        self.statements.append(sql)
        return str(await self.pool.execute(sql, *args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    def writes(self) -> list[str]:
        """The batch writes: the engine joins each one's parts into one ``WITH`` statement."""
        return [s for s in self.statements if s.startswith("WITH part_0 AS")]

    def lone_marks(self) -> list[str]:
        """Published marks sent as statements of their own."""
        return [s for s in self.statements if s.lstrip().startswith("UPDATE verdicts")]


def _env(s: WorkerSettings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": s.kafka.bootstrap_servers,
            "MODSTREAM_KAFKA__INPUT_TOPIC": s.kafka.input_topic,
            "MODSTREAM_KAFKA__DLQ_TOPIC": s.kafka.dlq_topic,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": s.kafka.verdict_topic,
            "MODSTREAM_KAFKA__GROUP_ID": s.kafka.group_id,
            "MODSTREAM_KAFKA__SESSION_TIMEOUT_MS": "6000",
            "MODSTREAM_POSTGRES__DSN": s.postgres.dsn.get_secret_value(),
            "MODSTREAM_TRITON__GRPC_URL": s.triton.grpc_url,
            "MODSTREAM_BATCH__MAX_WAIT_S": "0.2",
            "MODSTREAM_HTTP__PORT": "0",
            # The kill lands after the third publish was acknowledged, before its mark.
            "MODSTREAM_FAILPOINT": "kill:during_publish@3",
        }
    )
    return env


def _start_worker(s: WorkerSettings, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "modstream.cli", "worker"],
            env=_env(s),
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )


async def _rows(dsn: str, topic: str) -> dict[str, bool]:
    """``published`` of every verdict row of ``topic``, by message id."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT message_id, published FROM verdicts WHERE source_topic = $1", topic
        )
    finally:
        await conn.close()
    return {str(r["message_id"]): bool(r["published"]) for r in rows}


async def _dead_letters(dsn: str, topic: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM dead_letters WHERE source_topic = $1", topic)
        )
    finally:
        await conn.close()


async def _published(bootstrap: str, topic: str, expected: int) -> Counter[str]:
    """How often each message id was published to ``topic`` (read until ``expected`` records
    and a little longer, so an extra one would be seen)."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    seen: Counter[str] = Counter()
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while seen.total() < expected and asyncio.get_running_loop().time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen.update(orjson.loads(r.value)["message_id"] for r in records)
        for records in (await consumer.getmany(timeout_ms=1500)).values():
            seen.update(orjson.loads(r.value)["message_id"] for r in records)
    finally:
        await consumer.stop()
    return seen


async def test_a_batch_is_one_statement_and_a_kill_before_the_mark_resumes_exactly(
    worker_settings: WorkerSettings, tmp_path: Path
) -> None:
    """Killed between a publish and its mark, then resumed in process: every good record is one
    verdict row and every bad one a dead letter; each of the resumed worker's writes is one
    statement holding its verdicts and offsets (most also the marks of the batch before), its
    only other verdict statement is the last mark at shutdown; what the kill left unmarked is
    relayed, and only that is published twice."""
    settings = worker_settings.model_copy(
        update={
            "reliability": worker_settings.reliability.model_copy(
                # No lone mark while running, and the relay stays out of the resumed run.
                update={"published_mark_wait_s": 3600.0, "outbox_min_age_s": 3600.0}
            ),
            "rollups": worker_settings.rollups.model_copy(update={"refresh_interval_s": 0.0}),
        }
    )
    s = settings
    dsn = s.postgres.dsn.get_secret_value()
    topic = s.kafka.input_topic
    records = list(sample_stream(RECORDS, seed=45, malformed_every=60, id_prefix="one"))
    good = {r.message_id for r in records if r.message_id is not None}
    await produce(s.kafka.bootstrap_servers, topic, records)

    log = tmp_path / "killed.log"
    killed = _start_worker(s, log)
    try:
        returncode = await asyncio.to_thread(killed.wait, 120)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait()
    assert returncode == -9, log.read_text(errors="replace")[-2000:]
    at_kill = await _rows(dsn, topic)
    unmarked_at_kill = {m for m, published in at_kill.items() if not published}
    assert 0 < len(at_kill) < len(good), "the kill must land mid-stream"
    assert unmarked_at_kill, "the third publish's rows were never marked"

    parts = build_parts(s, consumer_group=s.kafka.group_id)
    database = parts.database
    counting: CountingPool | None = None

    def pool() -> Any:
        # Every store of the parts holds this one Database: all their statements pass here.
        nonlocal counting
        if counting is None:
            counting = CountingPool(Database.pool(database))
        return counting

    database.pool = pool  # type: ignore[method-assign]
    worker = Worker(s, build_stream_parts(s, moderation=parts))
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))

    async def all_handled() -> bool:
        if task.done():
            task.result()
        handled = len(await _rows(dsn, topic)) + await _dead_letters(dsn, topic)
        return handled >= len(records)

    await wait_until(all_handled, timeout_s=180)
    stop.set()
    await asyncio.wait_for(task, timeout=60)

    rows = await _rows(dsn, topic)
    assert set(rows) == good
    assert await _dead_letters(dsn, topic) == len(records) - len(good)
    assert counting is not None
    writes = counting.writes()
    sink_count = parts.metrics.registry.get_sample_value("modstream_sink_seconds_count")
    assert writes
    assert len(writes) == sink_count
    assert all("INSERT INTO consumer_offsets" in w for w in writes)
    assert sum("UPDATE verdicts" in w for w in writes) >= 1
    assert len(counting.lone_marks()) == parts.marks.sent_alone == 1
    # Every row the resumed worker stored is marked; only rows the kill left are not.
    assert {m for m, published in rows.items() if not published} <= unmarked_at_kill

    async with Database(s.postgres) as db:
        publisher = KafkaPublisher(s.kafka)
        await publisher.start()
        try:
            relay = VerdictOutbox(
                VerdictOutboxStore(db),
                publisher,
                s.kafka.verdict_topic,
                min_age_s=0.0,
                batch_items=500,
            )
            await relay.relay_all(topic)
        finally:
            await publisher.stop()
    assert all((await _rows(dsn, topic)).values())
    published = await _published(s.kafka.bootstrap_servers, s.kafka.verdict_topic, len(good))
    assert set(published) == good
    twice = {m for m, n in published.items() if n > 1}
    assert twice <= unmarked_at_kill
    assert max(published.values()) <= 2
