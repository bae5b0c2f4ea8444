"""The worker end to end against the real Kafka, PostgreSQL and Triton of the local stack."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from stack.kafka_tools import end_offsets
from stack.samples import SampleRecord, produce, sample_stream
from tests.integration.conftest import wait_until
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration


async def _outcomes(dsn: str, topic: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        verdicts = await conn.fetchval(
            "SELECT count(*) FROM verdicts WHERE source_topic = $1", topic
        )
        dead = await conn.fetchval(
            "SELECT count(*) FROM dead_letters WHERE source_topic = $1", topic
        )
    finally:
        await conn.close()
    return int(verdicts), int(dead)


async def _drain_topic(
    bootstrap: str, topic: str, expected: int, timeout_s: float = 60
) -> list[object]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    records: list[object] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while len(records) < expected and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for recs in batch.values():
                records.extend(recs)
        # Read a little longer so an extra (duplicate) record would be seen too.
        batch = await consumer.getmany(timeout_ms=1000)
        for recs in batch.values():
            records.extend(recs)
    finally:
        await consumer.stop()
    return records


async def test_every_record_gets_exactly_one_outcome(worker_settings: WorkerSettings) -> None:
    """N produced records end as exactly N verdict rows or dead letters, with offsets stored in
    Postgres and committed to Kafka, and one published verdict per verdict row."""
    s = worker_settings
    records = list(sample_stream(400, seed=11, malformed_every=25, id_prefix="e2e"))
    good = [r for r in records if r.message_id is not None]
    bad = len(records) - len(good)
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)

    stop = asyncio.Event()
    worker = Worker(s)
    task = asyncio.create_task(worker.run(stop))
    dsn = s.postgres.dsn.get_secret_value()

    async def all_handled() -> bool:
        if task.done():
            task.result()  # surface a crash instead of waiting for the timeout
        verdicts, dead = await _outcomes(dsn, s.kafka.input_topic)
        return verdicts + dead >= len(records)

    await wait_until(all_handled, timeout_s=120)
    stop.set()
    await asyncio.wait_for(task, timeout=60)

    verdicts, dead = await _outcomes(dsn, s.kafka.input_topic)
    assert (verdicts, dead) == (len(good), bad)

    conn = await asyncpg.connect(dsn)
    try:
        ids = [
            r["message_id"]
            for r in await conn.fetch(
                "SELECT message_id FROM verdicts WHERE source_topic = $1", s.kafka.input_topic
            )
        ]
        stored = {
            r["partition"]: r["next_offset"]
            for r in await conn.fetch(
                "SELECT partition, next_offset FROM consumer_offsets WHERE consumer_group = $1 "
                "AND topic = $2",
                s.kafka.group_id,
                s.kafka.input_topic,
            )
        }
        decided_by = Counter(
            r["decided_by"]
            for r in await conn.fetch(
                "SELECT decided_by FROM verdicts WHERE source_topic = $1", s.kafka.input_topic
            )
        )
    finally:
        await conn.close()
    assert sorted(ids) == sorted(r.message_id for r in good)
    assert decided_by["model"] > 0
    assert decided_by["rules"] > 0
    assert decided_by["pending_model"] == 0

    ends = await end_offsets(s.kafka.bootstrap_servers, s.kafka.input_topic)
    assert stored == {p: e for p, e in ends.items() if e > 0}

    consumer = AIOKafkaConsumer(
        bootstrap_servers=s.kafka.bootstrap_servers, group_id=s.kafka.group_id
    )
    await consumer.start()
    try:
        for partition, end in ends.items():
            if end:
                committed = await consumer.committed(TopicPartition(s.kafka.input_topic, partition))
                assert committed == end
    finally:
        await consumer.stop()

    published = await _drain_topic(s.kafka.bootstrap_servers, s.kafka.verdict_topic, len(good))
    payloads = [orjson.loads(r.value) for r in published]  # type: ignore[attr-defined]
    assert sorted(p["message_id"] for p in payloads) == sorted(r.message_id for r in good)
    assert all("text" not in p for p in payloads)

    letters = await _drain_topic(s.kafka.bootstrap_servers, s.kafka.dlq_topic, bad)
    assert len(letters) == bad
    for letter in letters:
        headers = dict(letter.headers)  # type: ignore[attr-defined]
        assert headers["source_topic"].decode() == s.kafka.input_topic
        assert headers["reason_code"]
        assert int(headers["source_offset"]) >= 0


def _worker_env(s: WorkerSettings) -> dict[str, str]:
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
        }
    )
    return env


def _start_worker(s: WorkerSettings, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "modstream.cli", "worker"],
            env=_worker_env(s),
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )


async def test_kill_and_restart_loses_nothing_and_doubles_nothing(
    worker_settings: WorkerSettings, tmp_path: Path
) -> None:
    """A worker killed with SIGKILL mid-stream and started again leaves exactly one verdict per
    good record and one dead letter per bad one; a SIGTERM'd worker drains and exits 0."""
    s = worker_settings
    dsn = s.postgres.dsn.get_secret_value()
    records = list(sample_stream(3000, seed=5, malformed_every=50, id_prefix="crash"))
    good = sum(1 for r in records if r.message_id is not None)
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)

    log = tmp_path / "worker.log"
    first = _start_worker(s, log)
    try:

        async def some_progress() -> bool:
            assert first.poll() is None, "worker exited early"
            verdicts, dead = await _outcomes(dsn, s.kafka.input_topic)
            return verdicts + dead >= 300

        await wait_until(some_progress, timeout_s=120, interval_s=0.05)
    finally:
        first.kill()
        first.wait()
    killed_at = sum(await _outcomes(dsn, s.kafka.input_topic))
    assert killed_at < len(records), "the kill must land mid-stream for this test to mean anything"

    second = _start_worker(s, log)
    try:

        async def all_handled() -> bool:
            assert second.poll() is None, "restarted worker exited early"
            return sum(await _outcomes(dsn, s.kafka.input_topic)) >= len(records)

        await wait_until(all_handled, timeout_s=180)
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 0, log.read_text(errors="replace")[-2000:]

    conn = await asyncpg.connect(dsn)
    try:
        distinct = await conn.fetchval(
            "SELECT count(DISTINCT message_id) FROM verdicts WHERE source_topic = $1",
            s.kafka.input_topic,
        )
    finally:
        await conn.close()
    verdicts, dead = await _outcomes(dsn, s.kafka.input_topic)
    assert verdicts == distinct == good
    assert dead == len(records) - good


async def test_moderators_strikes_escalate_repeat_offenders(
    worker_settings: WorkerSettings,
) -> None:
    """A sender with 3 live strikes from moderators' decisions (``sender_strikes``) trips the
    repeat-offender rule on an otherwise harmless message; a sender without strikes does not."""
    s = worker_settings
    dsn = s.postgres.dsn.get_secret_value()
    conn = await asyncpg.connect(dsn)
    try:
        item = await conn.fetchval(
            "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
            "message_id, group_id, sender_id, message_text, auto_decision) VALUES "
            "($1, 0, 0, now(), 'old', 'g', 'struck-user', 'earlier abuse', 'flag') RETURNING id",
            f"{s.kafka.input_topic}.history",
        )
        await conn.execute(
            "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, weight, "
            "expires_at) VALUES ('struck-user', 'g', $1, 'ban', 3, now() + interval '1 day')",
            item,
        )
    finally:
        await conn.close()
    records = []
    for sender in ("struck-user", "clean-user"):
        doc = {
            "message_id": f"strikes-{sender}",
            "group_id": "g",
            "sender_id": sender,
            "text": "good morning everyone",
            "sent_at": "2026-12-02T09:00:00Z",
        }
        records.append(SampleRecord(b"g", orjson.dumps(doc), doc["message_id"], "benign"))
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)

    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))

    async def both_handled() -> bool:
        if task.done():
            task.result()
        verdicts, _ = await _outcomes(dsn, s.kafka.input_topic)
        return verdicts >= 2

    await wait_until(both_handled, timeout_s=60)
    stop.set()
    await asyncio.wait_for(task, timeout=60)
    conn = await asyncpg.connect(dsn)
    try:
        rows = {
            r["sender_id"]: r
            for r in await conn.fetch(
                "SELECT sender_id, escalated, rule_hits::text AS hits FROM verdicts "
                "WHERE source_topic = $1",
                s.kafka.input_topic,
            )
        }
    finally:
        await conn.close()
    assert rows["struck-user"]["escalated"]
    assert "profile.repeat_offender" in rows["struck-user"]["hits"]
    assert "profile.repeat_offender" not in rows["clean-user"]["hits"]
