"""The ClickHouse path (clickhouse/*.sql) on the real ClickHouse engine that chdb embeds, fed by
its own Kafka engine tables from the stack's broker: the same answers as PostgreSQL's rollups,
and PostgreSQL's retention and erasures reaching it.

The records come from the verdict topic after a real run: ``modstream worker`` decides sample
chat, the outbox relay publishes some verdicts a second time (at-least-once delivery), and
pending verdicts are published, then re-scored by ``modstream rescore`` and published again in
their new state. ``02_kafka.sql`` runs as written but for its broker list, topics and consumer
groups, which name this test's; ClickHouse consumes the topics itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from chdb import session as chdb_session
from chdb._exceptions import ChdbError  # what a session's query raises (not chdb.ChdbError)

from admin.retention import RetentionPeriods, apply_retention
from common.rollups import refresh_rollups
from common.settings import project_root
from engine.outbox import VerdictOutbox
from engine.publisher import KafkaPublisher
from engine.stores.database import Database
from engine.stores.pending_texts import PendingText
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleOutcome
from pipelines.verdict import Verdict
from stack.samples import produce, sample_stream
from tests.integration.conftest import wait_until
from tests.support import run_rescore, temporary_database
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_FOLDER = project_root() / "clickhouse"
_COMPARED = (1, 2, 3, 8, 10)
"""docs/analysts.md queries whose ClickHouse version must give PostgreSQL's answer."""
_SHIPPED = {
    "kafka_broker_list": "'kafka:9092'",
    "verdict_topic": "'moderation.verdicts'",
    "erasure_topic": "'moderation.erasures'",
    "verdict_group": "'modstream-clickhouse'",
    "erasure_group": "'modstream-clickhouse-erasures'",
}
"""The values 02_kafka.sql ships with, each quoted as it appears there."""


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


def deployed(sql: str, values: Mapping[str, str]) -> str:
    """``sql`` with 02_kafka.sql's shipped broker list, topics and groups replaced by ``values``
    (keys of ``_SHIPPED``), as a deployment edits them."""
    for key, shipped in _SHIPPED.items():
        sql = sql.replace(shipped, f"'{values[key]}'")
    return sql


class ClickHouse:
    """A chdb session holding the clickhouse/ schema, its Kafka tables reading ``values``'s
    broker, topics and consumer groups."""

    def __init__(self, path: Path, values: Mapping[str, str]) -> None:
        self._session = chdb_session.Session(str(path))
        try:
            for sql in statements(_FOLDER / "01_verdicts.sql"):
                self.run(sql)
            for sql in statements(_FOLDER / "02_kafka.sql"):
                self.create(deployed(sql, values))
        except BaseException:
            self.close()  # chdb holds one embedded server per process: free it for the next test
            raise

    def run(self, sql: str) -> None:
        self._session.query(sql)

    def create(self, sql: str) -> None:
        """Run a CREATE; chdb 4.4 answers a Kafka engine table's with an error (``Shutdown was
        called``) after creating it, and the table consumes: an error counts only when the table
        is not there."""
        try:
            self.run(sql)
        except ChdbError:
            match = re.match(r"CREATE TABLE (\w+)", sql)
            if match is None or not self.rows(
                f"SELECT 1 FROM system.tables WHERE database = currentDatabase() "  # noqa: S608 (a name of 02_kafka.sql)
                f"AND name = '{match[1]}' AND engine = 'Kafka'"
            ):
                raise

    def rows(self, sql: str) -> list[dict[str, Any]]:
        out = self._session.query(sql, "JSONEachRow").bytes()
        return [orjson.loads(line) for line in out.splitlines() if line.strip()]

    def close(self) -> None:
        self._session.close()


async def caught_up(bootstrap_servers: str, group: str, topic: str) -> bool:
    """Whether ``group`` has committed every partition of ``topic`` up to its end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await consumer.start()
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        partitions = [TopicPartition(topic, p["partition"]) for p in described["partitions"]]
        ends = await consumer.end_offsets(partitions)
        committed = await admin.list_consumer_group_offsets(group)
        return bool(partitions) and all(
            end == 0 or (tp in committed and committed[tp].offset >= end)
            for tp, end in ends.items()
        )
    finally:
        await admin.close()
        await consumer.stop()


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


def _pending(
    topic: str,
    offset: int,
    text: str,
    *,
    sender_id: str | None = None,
    sent_at: datetime | None = None,
) -> Verdict:
    result = decide(RuleOutcome(), None, PolicyThresholds(), model_available=False)
    return Verdict(
        position=SourcePosition(topic, offset % 2, offset),
        message_id=f"ch-{offset}",
        group_id=f"g-ch-{offset % 3}",
        sender_id=sender_id or f"u-ch-{offset % 2}",
        sent_at=sent_at or datetime.now(UTC),
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


@pytest.fixture
async def feed(scoped: WorkerSettings) -> AsyncIterator[dict[str, str]]:
    """What this test's ClickHouse reads: the broker, the test's verdict topic, an erasure topic
    of its own (created here, deleted after) and consumer groups no one else uses."""
    suffix = uuid.uuid4().hex[:8]
    values = {
        "kafka_broker_list": scoped.kafka.bootstrap_servers,
        "verdict_topic": scoped.kafka.verdict_topic,
        "erasure_topic": f"it.{suffix}.moderation.erasures",
        "verdict_group": f"it.{suffix}.clickhouse",
        "erasure_group": f"it.{suffix}.clickhouse-erasures",
    }
    admin = AIOKafkaAdminClient(bootstrap_servers=scoped.kafka.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(values["erasure_topic"], 2, 1)])
        yield values
        await admin.delete_topics([values["erasure_topic"]])
    finally:
        await admin.close()


async def _consumed(clickhouse_feed: Mapping[str, str]) -> None:
    """Wait until this ClickHouse has committed both of its topics to their ends."""
    broker = clickhouse_feed["kafka_broker_list"]

    async def done() -> bool:
        return await caught_up(
            broker, clickhouse_feed["verdict_group"], clickhouse_feed["verdict_topic"]
        ) and await caught_up(
            broker, clickhouse_feed["erasure_group"], clickhouse_feed["erasure_topic"]
        )

    await wait_until(done, timeout_s=90, interval_s=1.0)


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
    scoped: WorkerSettings, feed: dict[str, str], tmp_path: Path
) -> None:
    """Its Kafka engine consuming the worker's published records (duplicates and re-scored
    versions included), ClickHouse's views count each verdict once in its latest state and the
    rewritten example queries give PostgreSQL's answers; every rewritten query runs."""
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
        clickhouse = ClickHouse(tmp_path / "chdb", feed)
        try:
            await _consumed(feed)
            last: dict[int, int] = {}
            for partition, offset, _ in records:
                last[partition] = max(offset, last.get(partition, -1))
            newest = clickhouse.rows(
                "SELECT kafka_partition AS p, max(kafka_offset) AS o FROM moderation_verdicts "
                "GROUP BY p"
            )
            assert {int(r["p"]): int(r["o"]) for r in newest} == last  # read to the end
            counted = clickhouse.rows("SELECT count() AS n FROM moderation_verdicts FINAL")
            assert int(counted[0]["n"]) == stored
            tenants_ch = {
                r["tenant"]: int(r["n"])
                for r in clickhouse.rows(
                    "SELECT tenant, count() AS n FROM moderation_verdicts FINAL GROUP BY tenant"
                )
            }
            tenants_pg = {
                r["tenant"]: r["n"]
                for r in await conn.fetch("SELECT tenant, count(*) AS n FROM verdicts GROUP BY 1")
            }
            assert tenants_ch == tenants_pg  # every row carries its tenant
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


def test_kafka_tables_ship_their_settings_and_the_ttl_is_retentions(tmp_path: Path) -> None:
    """02_kafka.sql's two Kafka engine tables are valid ClickHouse (its own parser, EXPLAIN
    SYNTAX, keeps every setting) and name the shipped topics and groups the docs describe; the
    verdicts' and erasures' TTL is ``modstream retention``'s default verdict period."""
    kafka = [sql for sql in statements(_FOLDER / "02_kafka.sql") if "ENGINE = Kafka" in sql]
    assert len(kafka) == 2
    session = chdb_session.Session(str(tmp_path / "chdb"))
    try:
        for sql, topic, group in zip(
            kafka,
            ("verdict_topic", "erasure_topic"),
            ("verdict_group", "erasure_group"),
            strict=True,
        ):
            explained = session.query(f"EXPLAIN SYNTAX {sql}", "TabSeparatedRaw").bytes().decode()
            for setting in (
                f"kafka_broker_list = {_SHIPPED['kafka_broker_list']}",
                f"kafka_topic_list = {_SHIPPED[topic]}",
                f"kafka_group_name = {_SHIPPED[group]}",
                "kafka_format = 'JSONAsString'",
                "kafka_handle_error_mode = 'stream'",
            ):
                assert setting in explained, setting
    finally:
        session.close()
    keep_days = RetentionPeriods().verdicts.days
    ttls = re.findall(r"^TTL (.+);$", (_FOLDER / "01_verdicts.sql").read_text(), re.MULTILINE)
    assert ttls == [
        f"toDateTime(sent_at) + INTERVAL {keep_days} DAY",
        f"toDateTime(erased_at) + INTERVAL {keep_days} DAY",
    ]


_ERASURE_AUDIT = (
    "SELECT count() AS leftover FROM moderation_verdicts AS v FINAL "
    "JOIN moderation_erasures AS e USING sender_id WHERE v.sent_at <= e.erased_at"
)
"""docs/analysts.md's check for verdicts left of an erased sender."""
_AGES_DAYS = (200, 95, 85, 30, 1)
"""How old the retention test's messages are: the first two past 90 days, the rest within."""


async def _publish_unpublished(s: WorkerSettings, database: Database) -> int:
    async with KafkaPublisher(s.kafka) as publisher:
        outbox = VerdictOutbox(
            VerdictOutboxStore(database),
            publisher,
            s.kafka.verdict_topic,
            min_age_s=0,
            batch_items=100,
        )
        return await outbox.relay_all()


async def _keys_in_postgres(conn: asyncpg.Connection[Any], topic: str) -> set[tuple[int, int]]:
    rows = await conn.fetch(
        "SELECT source_partition, source_offset FROM verdicts WHERE source_topic = $1", topic
    )
    return {(r["source_partition"], r["source_offset"]) for r in rows}


def _keys_in_clickhouse(clickhouse: ClickHouse, topic: str) -> set[tuple[int, int]]:
    rows = clickhouse.rows(
        "SELECT source_partition, source_offset FROM moderation_verdicts FINAL "  # noqa: S608 (a test topic)
        f"WHERE source_topic = '{topic}'"
    )
    return {(int(r["source_partition"]), int(r["source_offset"])) for r in rows}


async def test_retention_and_erasure_reach_clickhouse(
    scoped: WorkerSettings, feed: dict[str, str], tmp_path: Path
) -> None:
    """Verdicts 200, 95, 85, 30 and 1 days old, published to the verdict topic: after
    ``apply_retention`` (90 days) in PostgreSQL and a merge in ClickHouse (its TTL), both hold
    the same verdicts, the last three ages. A sender erased in PostgreSQL, and its erasure
    published: ClickHouse drops their verdicts at once, a re-published old record of theirs and
    one it had not read before the erasure stay out, their message sent after the erasure
    counts, and after a merge no row names them before the erasure; a row that slipped past
    both consumers is found by the audit query and removed by publishing the erasure again."""
    s = scoped
    topic = s.kafka.input_topic
    now = datetime.now(UTC)
    verdicts = [
        _pending(
            topic,
            20_000 + i,
            "see you tomorrow",
            sender_id=("u-erased", "u-kept")[i % 2],
            sent_at=now - timedelta(days=_AGES_DAYS[i // 2]),
        )
        for i in range(2 * len(_AGES_DAYS))
    ]
    dsn = s.postgres.dsn.get_secret_value()
    async with Database(s.postgres) as database:
        await VerdictBatchStore(database, s.kafka.group_id).write(VerdictBatch(verdicts))
        assert await _publish_unpublished(s, database) == len(verdicts)
        clickhouse = ClickHouse(tmp_path / "chdb", feed)
        conn = await asyncpg.connect(dsn)
        try:
            await _consumed(feed)
            await apply_retention(conn, timedelta(days=90))
            clickhouse.run("OPTIMIZE TABLE moderation_verdicts FINAL")
            kept = await _keys_in_postgres(conn, topic)
            assert len(kept) == 2 * 3  # the 85, 30 and 1 day old messages of both senders
            assert _keys_in_clickhouse(clickhouse, topic) == kept

            # The PostgreSQL side of an erasure, then its record on the erasure topic.
            old_record = await _record_of(s, "u-erased")
            erased_at = datetime.now(UTC)
            await conn.execute("DELETE FROM verdicts WHERE sender_id = 'u-erased'")
            await _produce(
                s,
                feed["erasure_topic"],
                b"u-erased",
                {"schema_version": 1, "sender_id": "u-erased", "erased_at": erased_at.isoformat()},
            )
            await _consumed(feed)
            assert _keys_in_clickhouse(clickhouse, topic) == await _keys_in_postgres(conn, topic)

            # Late: an old record of theirs published again, one from before the erasure that
            # ClickHouse had not read yet (in flight: coordinates it never saw), and a message
            # they sent after it.
            republished = orjson.loads(old_record)
            in_flight = {**republished, "source_offset": 29_999, "message_id": "ch-in-flight"}
            for record in (republished, in_flight):
                await _produce(s, s.kafka.verdict_topic, b"g-late", record)
            after = _pending(topic, 30_000, "hello again", sender_id="u-erased")
            await VerdictBatchStore(database, s.kafka.group_id).write(VerdictBatch([after]))
            assert await _publish_unpublished(s, database) == 1
            await _consumed(feed)
            now_kept = await _keys_in_postgres(conn, topic)
            assert (after.position.partition, after.position.offset) in now_kept
            assert _keys_in_clickhouse(clickhouse, topic) == now_kept

            clickhouse.run("OPTIMIZE TABLE moderation_verdicts FINAL")
            left = clickhouse.rows(
                "SELECT count() AS n FROM moderation_verdicts "  # noqa: S608 (a time of this test)
                "WHERE sender_id = 'u-erased' AND sent_at <= "
                f"parseDateTime64BestEffort('{erased_at.isoformat()}', 6, 'UTC')"
            )
            assert int(left[0]["n"]) == 0
            assert _keys_in_clickhouse(clickhouse, topic) == now_kept

            # A row that slipped past both consumers (written as the erasure was applied): the
            # audit query of docs/analysts.md finds it, and the erasure published again removes it.
            slipped = {**in_flight, "source_offset": 29_998}
            clickhouse.run(
                "INSERT INTO moderation_verdicts (source_topic, source_partition, source_offset, "  # noqa: S608 (this test's values)
                "sent_at, sender_id, kafka_offset) VALUES "
                f"('{topic}', {slipped['source_partition']}, {slipped['source_offset']}, "
                f"parseDateTime64BestEffort('{slipped['sent_at']}', 6, 'UTC'), 'u-erased', 1)"
            )
            assert clickhouse.rows(_ERASURE_AUDIT) == [{"leftover": 1}]
            await _produce(
                s,
                feed["erasure_topic"],
                b"u-erased",
                {"schema_version": 1, "sender_id": "u-erased", "erased_at": erased_at.isoformat()},
            )
            await _consumed(feed)
            assert clickhouse.rows(_ERASURE_AUDIT) == [{"leftover": 0}]
            assert _keys_in_clickhouse(clickhouse, topic) == now_kept
        finally:
            await conn.close()
            clickhouse.close()


async def _record_of(s: WorkerSettings, sender_id: str) -> bytes:
    """One published verdict record of ``sender_id`` (its value, as the topic holds it)."""
    for _, _, value in await _published(s, 1):
        if orjson.loads(value)["sender_id"] == sender_id:
            return value
    raise AssertionError(f"no published record of {sender_id}")


async def _produce(s: WorkerSettings, topic: str, key: bytes, value: dict[str, Any]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=s.kafka.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(topic, orjson.dumps(value), key=key)
    finally:
        await producer.stop()
