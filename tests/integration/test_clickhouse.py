"""The ClickHouse path (clickhouse/*.sql) on the real ClickHouse engine that chdb embeds, fed with
the records a worker published in this test: the same answers as PostgreSQL's rollups.

The records come from the verdict topic after a real run: ``modstream worker`` decides sample
chat, the outbox relay publishes some verdicts a second time (at-least-once delivery), and
pending verdicts are published, then re-scored by ``modstream rescore`` and published again in
their new state. They are inserted, with their Kafka partition and offset, into the table the
Kafka engine's materialized view reads (the engine itself cannot run inside chdb: it needs a
server's background pools), built from ``02_kafka.sql``'s own CREATE statement with the engine
swapped for ``Null``; the materialized view's statement runs as written.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from chdb import session as chdb_session

from common.rollups import refresh_rollups
from common.settings import project_root
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleOutcome
from pipelines.verdict import Verdict
from stack.samples import produce, sample_stream
from tests.integration.conftest import wait_until
from tests.support import run_rescore, temporary_database
from worker.app import Worker
from worker.outbox import VerdictOutbox
from worker.publisher import KafkaPublisher
from worker.settings import WorkerSettings
from worker.stores.database import Database
from worker.stores.pending_texts import PendingText
from worker.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from worker.stores.verdict_outbox import VerdictOutboxStore

pytestmark = pytest.mark.integration

_FOLDER = project_root() / "clickhouse"
_COMPARED = (1, 2, 3, 8, 10)
"""docs/analysts.md queries whose ClickHouse version must give PostgreSQL's answer."""
_KAFKA_VIRTUAL_COLUMNS = "_partition UInt64, _offset UInt64, _error String"
"""The Kafka engine's virtual columns the materialized view reads."""


def statements(path: Path) -> list[str]:
    """The SQL statements of ``path`` (comments dropped, split on ``;`` at line ends)."""
    text = "\n".join(
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("--")
    )
    return [s.strip() for s in re.split(r";\s*\n", text) if s.strip()]


def clickhouse_queries() -> dict[int, str]:
    """03_queries.sql by query number."""
    text = (_FOLDER / "03_queries.sql").read_text(encoding="utf-8")
    parts = re.split(r"^-- query (\d+):.*$", text, flags=re.MULTILINE)
    return {
        int(n): body.strip().rstrip(";") for n, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def kafka_feed_table(create_kafka_table: str) -> str:
    """02_kafka.sql's Kafka table, as a ``Null`` table that also has the engine's virtual
    columns: what the materialized view reads, fillable by INSERT."""
    head, engine, _ = create_kafka_table.partition("ENGINE = Kafka")
    assert engine, "02_kafka.sql's first statement must create the Kafka engine table"
    columns_end = head.rindex(")")
    return f"{head[:columns_end].rstrip()},\n    {_KAFKA_VIRTUAL_COLUMNS}\n) ENGINE = Null"


class ClickHouse:
    """A chdb session holding the clickhouse/ schema, with the Kafka queue as a feed table."""

    def __init__(self, path: Path) -> None:
        self._session = chdb_session.Session(str(path))
        kafka = statements(_FOLDER / "02_kafka.sql")
        for sql in statements(_FOLDER / "01_verdicts.sql"):
            self.run(sql)
        self.run(kafka_feed_table(kafka[0]))
        for sql in kafka[1:]:
            self.run(sql)

    def run(self, sql: str) -> None:
        self._session.query(sql)

    def rows(self, sql: str) -> list[dict[str, Any]]:
        out = self._session.query(sql, "JSONEachRow").bytes()
        return [orjson.loads(line) for line in out.splitlines() if line.strip()]

    def feed(self, records: list[tuple[int, int, bytes]]) -> None:
        lines = b"\n".join(
            orjson.dumps({"record": value.decode(), "_partition": p, "_offset": o, "_error": ""})
            for p, o, value in records
        )
        self._session.query(
            "INSERT INTO moderation_verdicts_queue (record, _partition, _offset, _error) "
            "FORMAT JSONEachRow\n" + lines.decode()
        )

    def close(self) -> None:
        self._session.close()


def _plain(value: Any) -> Any:
    """One value as both engines' rows compare: numbers as floats (4 places), days as text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float | Decimal):
        return round(float(value), 4)
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value):
        return round(float(value), 4)  # ClickHouse quotes 64-bit integers in JSON
    return value


def _normal(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(_plain(v) for v in row.values()) for row in rows]


def _agree(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> bool:
    """Rows equal, numbers within one unit of their 4th place: a share the query rounds to 4
    places lands on either side of a tie (5/32 = 0.15625) as each engine rounds it."""

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return abs(a - b) <= 1.01e-4
        return bool(a == b)

    return len(got) == len(expected) and all(
        len(g) == len(e) and all(same(a, b) for a, b in zip(g, e, strict=True))
        for g, e in zip(got, expected, strict=True)
    )


def _pending(topic: str, offset: int, text: str) -> Verdict:
    result = decide(RuleOutcome(), None, PolicyThresholds(), model_available=False)
    return Verdict(
        position=SourcePosition(topic, offset % 2, offset),
        message_id=f"ch-{offset}",
        group_id=f"g-ch-{offset % 3}",
        sender_id=f"u-ch-{offset % 2}",
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


@pytest.fixture
async def scoped(worker_settings: WorkerSettings) -> AsyncIterator[WorkerSettings]:
    """This test's topics, a database of its own, and no rollup job in the worker."""
    async with temporary_database(worker_settings, prefix="modstream_test_clickhouse") as s:
        yield s.model_copy(
            update={"rollups": s.rollups.model_copy(update={"refresh_interval_s": 0})}
        )


async def _worker_run(s: WorkerSettings, count: int) -> None:
    records = list(sample_stream(count, seed=25, id_prefix="ch", groups=6, senders=15))
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    dsn = s.postgres.dsn.get_secret_value()

    async def decided() -> bool:
        if task.done():
            task.result()
        conn = await asyncpg.connect(dsn)
        try:
            return bool(await conn.fetchval("SELECT count(*) FROM verdicts") >= count)
        finally:
            await conn.close()

    await wait_until(decided, timeout_s=120)
    stop.set()
    await asyncio.wait_for(task, timeout=60)


async def _republish_and_rescore(s: WorkerSettings) -> None:
    """Some verdicts published twice; pending ones published, re-scored, published again."""
    topic = s.kafka.input_topic
    texts = ["what a lovely day", "buy cheap followers now", "see you tomorrow", "you idiot"]
    pending = [_pending(topic, 10_000 + i, t) for i, t in enumerate(texts)]
    async with Database(s.postgres) as database, KafkaPublisher(s.kafka) as publisher:
        await VerdictBatchStore(database, s.kafka.group_id).write(
            VerdictBatch(
                pending,
                pending_texts=[
                    PendingText(v.position, v.sent_at, t)
                    for v, t in zip(pending, texts, strict=True)
                ],
            )
        )
        await database.pool().execute(
            "UPDATE verdicts SET published = false WHERE source_offset % 5 = 0"
        )
        outbox = VerdictOutbox(
            VerdictOutboxStore(database),
            publisher,
            s.kafka.verdict_topic,
            min_age_s=0,
            batch_items=100,
        )
        assert await outbox.relay_all() >= len(pending)
    run = await run_rescore(s, topic)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"rescored={len(pending)}" in run.stdout


async def _published(s: WorkerSettings, at_least: int) -> list[tuple[int, int, bytes]]:
    """Every record of the verdict topic: (partition, offset, value)."""
    consumer = AIOKafkaConsumer(
        s.kafka.verdict_topic,
        bootstrap_servers=s.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    out: list[tuple[int, int, bytes]] = []
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            for records in batch.values():
                out.extend((r.partition, r.offset, r.value) for r in records if r.value)
            if len(out) >= at_least and not batch:
                break
    finally:
        await consumer.stop()
    return out


async def test_clickhouse_views_and_queries_match_postgres(
    scoped: WorkerSettings, tmp_path: Path
) -> None:
    """Fed the worker's published records (duplicates and re-scored versions included), the
    ClickHouse views count each verdict once in its latest state and the rewritten example
    queries give PostgreSQL's answers; every rewritten query runs."""
    s = scoped
    await _worker_run(s, 150)
    await _republish_and_rescore(s)
    dsn = s.postgres.dsn.get_secret_value()
    conn = await asyncpg.connect(dsn)
    try:
        stored = await conn.fetchval("SELECT count(*) FROM verdicts")
        assert await refresh_rollups(conn) == stored + 4  # 4 re-scored rows: queued changes
        records = await _published(s, stored)
        assert len(records) > stored  # the topic holds repeats and superseded versions
        clickhouse = ClickHouse(tmp_path / "chdb")
        try:
            clickhouse.feed(records)
            counted = clickhouse.rows("SELECT count() AS n FROM moderation_verdicts FINAL")
            assert int(counted[0]["n"]) == stored
            pending = clickhouse.rows(
                "SELECT count() AS n FROM moderation_verdicts FINAL "
                "WHERE decided_by = 'pending_model'"
            )
            assert int(pending[0]["n"]) == 0  # the re-scored state won
            docs = dict(_doc_queries())
            for number, sql in clickhouse_queries().items():
                answer = clickhouse.rows(sql)  # every rewritten query runs
                if number in _COMPARED:
                    assert answer, f"ClickHouse query {number} returned nothing"
                    expected = [dict(r) for r in await conn.fetch(docs[number])]
                    assert _agree(_normal(answer), _normal(expected)), (
                        f"query {number}: {_normal(answer)} != {_normal(expected)}"
                    )
            latency_ch = {
                (r["day"], r["decided_by"]): int(r["verdicts"])
                for r in clickhouse.rows("SELECT * FROM analytics_verdict_latency_daily")
            }
            latency_pg = {
                (r["day"].isoformat(), r["decided_by"]): r["verdicts"]
                for r in await conn.fetch("SELECT * FROM analytics_verdict_latency_daily")
            }
            assert latency_ch == latency_pg
        finally:
            clickhouse.close()
    finally:
        await conn.close()


def _doc_queries() -> list[tuple[int, str]]:
    text = (project_root() / "docs" / "analysts.md").read_text(encoding="utf-8")
    section = text.split("## Example queries", 1)[1]
    blocks = re.findall(r"### (\d+)\..*?```sql\n(.*?)```", section, flags=re.DOTALL)
    return [(int(n), sql) for n, sql in blocks]


def test_kafka_table_ddl_parses_and_feeds_the_view(tmp_path: Path) -> None:
    """02_kafka.sql's Kafka engine table is valid ClickHouse (its own parser, EXPLAIN SYNTAX,
    keeps every setting), and the view over it accepts exactly that table's columns plus the
    engine's virtual ones (the feed table is built from the same statement)."""
    kafka = statements(_FOLDER / "02_kafka.sql")
    assert len(kafka) == 2
    session = chdb_session.Session(str(tmp_path / "chdb"))
    try:
        explained = session.query(f"EXPLAIN SYNTAX {kafka[0]}", "TabSeparatedRaw").bytes().decode()
        for setting in (
            "kafka_broker_list",
            "kafka_topic_list",
            "kafka_group_name",
            "kafka_format = 'JSONAsString'",
            "kafka_handle_error_mode = 'stream'",
        ):
            assert setting in explained
        for sql in statements(_FOLDER / "01_verdicts.sql"):
            session.query(sql)
        session.query(kafka_feed_table(kafka[0]))
        session.query(kafka[1])
        views = session.query(
            "SELECT name FROM system.tables WHERE engine = 'MaterializedView'", "CSV"
        ).bytes()
        assert b"moderation_verdicts_queue_mv" in views
    finally:
        session.close()
