"""The analysts' rollups equal the raw aggregation of the same verdicts, after every kind of write.

Verdicts go in through the worker's own store (``VerdictBatchStore``), are re-scored by
``modstream rescore`` (engine/rescore.py, real Triton and Kafka), resolved through the review
queue, and changed by a plain UPDATE (what a re-scan will do); after each step the rollup job runs
(``common.rollups.refresh_rollups``) and every rollup view is compared with the aggregation of
the raw rows that the views computed before ``migrations/0070_rollups.sql`` (kept below as the
reference). Latency percentiles are compared with the exact nearest-rank percentile within the
documented bucket bound.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from pydantic import SecretStr

from admin.migrate import apply_migrations, discover
from admin.retention import RetentionError, RetentionPeriods, apply_retention
from common.rollups import refresh_rollups, rollup_freshness
from common.settings import project_root
from engine.stores.database import Database
from engine.stores.pending_texts import PendingText
from engine.stores.review_items import Escalation
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.severe_harm import SEVERE_CATEGORIES
from pipelines.verdict import Verdict
from pipelines.verdict_codec import verdict_row_key
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict
from review.queue import ReviewQueue
from review.schemas import Action, Role, User
from review.settings import ReviewServiceSettings
from stack.samples import produce, sample_stream
from tests.integration.conftest import wait_until
from tests.support import run_rescore, temporary_database, with_database
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_BUCKET_BOUND = 2 ** (1 / 16)
"""A histogram percentile is within this factor of the exact one (0070's bucket edges)."""

# The raw aggregations the views computed before the rollups (0003 and 0050), as references.
_RAW = {
    "analytics_verdict_rates_daily": """
        SELECT (sent_at AT TIME ZONE 'UTC')::date AS day, group_id,
               COALESCE(category, 'none') AS category, decision,
               count(*) AS verdicts, count(*) FILTER (WHERE escalated) AS escalated,
               count(*) FILTER (WHERE decided_by = 'rules') AS by_rules,
               count(*) FILTER (WHERE decided_by = 'model') AS by_model,
               count(*) FILTER (WHERE decided_by = 'pending_model') AS pending_model,
               round(count(*)::numeric / sum(count(*)) OVER (
                   PARTITION BY (sent_at AT TIME ZONE 'UTC')::date, group_id), 4)
                   AS share_of_group_day
        FROM verdicts GROUP BY 1, 2, 3, 4""",
    "analytics_verdict_rates_hourly": """
        SELECT date_trunc('hour', sent_at, 'UTC') AS hour, group_id,
               COALESCE(category, 'none') AS category, decision, decided_by,
               count(*) AS verdicts, count(*) FILTER (WHERE escalated) AS escalated
        FROM verdicts GROUP BY 1, 2, 3, 4, 5""",
    "analytics_verdict_totals_daily": """
        SELECT (sent_at AT TIME ZONE 'UTC')::date AS day, COALESCE(category, 'none') AS category,
               decision, count(*) AS verdicts, count(*) FILTER (WHERE escalated) AS escalated,
               count(*) FILTER (WHERE decided_by = 'rules') AS by_rules,
               count(*) FILTER (WHERE decided_by = 'model') AS by_model,
               count(*) FILTER (WHERE decided_by = 'pending_model') AS pending_model
        FROM verdicts GROUP BY 1, 2, 3""",
    "analytics_rule_hits_daily": """
        SELECT (v.sent_at AT TIME ZONE 'UTC')::date AS day, h ->> 'rule_id' AS rule_id,
               h ->> 'category' AS category, h ->> 'severity' AS severity,
               h ->> 'action' AS action, count(*) AS hits,
               count(*) FILTER (WHERE v.decision = 'block') AS blocked
        FROM verdicts v CROSS JOIN LATERAL jsonb_array_elements(v.rule_hits) AS h
        GROUP BY 1, 2, 3, 4, 5""",
    "analytics_top_rules": """
        SELECT h ->> 'rule_id' AS rule_id, h ->> 'category' AS category,
               h ->> 'severity' AS severity, h ->> 'action' AS action, count(*) AS hits,
               count(DISTINCT v.group_id) AS groups, count(DISTINCT v.sender_id) AS senders,
               date_trunc('hour', min(v.sent_at), 'UTC') AS first_hit,
               date_trunc('hour', max(v.sent_at), 'UTC') AS last_hit,
               rank() OVER (ORDER BY count(*) DESC) AS hit_rank
        FROM verdicts v CROSS JOIN LATERAL jsonb_array_elements(v.rule_hits) AS h
        GROUP BY 1, 2, 3, 4""",
    "analytics_sender_flags_daily": """
        SELECT (sent_at AT TIME ZONE 'UTC')::date AS day, sender_id, group_id,
               count(*) FILTER (WHERE decision = 'block') AS blocked,
               count(*) FILTER (WHERE decision = 'flag') AS flagged
        FROM verdicts WHERE decision <> 'allow' GROUP BY 1, 2, 3""",
    "analytics_severe_harm_daily": """
        SELECT (v.sent_at AT TIME ZONE 'UTC')::date AS day, v.group_id, s.category,
               count(*) AS verdicts, count(*) FILTER (WHERE v.decision = 'block') AS blocked,
               count(*) FILTER (WHERE v.decision = 'flag') AS flagged,
               count(*) FILTER (WHERE v.decision = 'allow') AS allowed,
               count(*) FILTER (WHERE v.escalated) AS escalated,
               count(DISTINCT v.sender_id) AS senders
        FROM verdicts v
        CROSS JOIN LATERAL (
            SELECT DISTINCT h ->> 'category' AS category
            FROM jsonb_array_elements(v.rule_hits) AS h
            WHERE h ->> 'category' IN ('self_harm', 'sexual_exploitation_minors', 'threat',
                                       'sexual_exploitation', 'self_harm_incitement')) s
        GROUP BY 1, 2, 3""",
    "analytics_model_agreement": """
        SELECT v.model_name, v.model_version, COALESCE(r.category, 'none') AS category,
               count(*) AS decided,
               count(*) FILTER (WHERE (v.decision <> 'allow') = (r.resolution <> 'approve'))
                   AS agreed,
               round(count(*) FILTER (
                   WHERE (v.decision <> 'allow') = (r.resolution <> 'approve'))::numeric
                   / count(*), 4) AS agreement_rate,
               count(*) FILTER (WHERE v.decision <> 'allow' AND r.resolution = 'approve')
                   AS model_harsher,
               count(*) FILTER (WHERE v.decision = 'allow' AND r.resolution <> 'approve')
                   AS model_softer
        FROM review_items r
        JOIN verdicts v
          ON v.source_topic = r.source_topic AND v.source_partition = r.source_partition
         AND v.source_offset = r.source_offset AND v.sent_at = r.sent_at
        WHERE r.status = 'resolved' AND v.model_version IS NOT NULL
        GROUP BY 1, 2, 3""",
}

_RAW_REVIEW_TIMES = """
    SELECT COALESCE(category, 'none') AS category, count(*) AS decided,
           percentile_disc(0.5) WITHIN GROUP (ORDER BY decision_s) AS p50_s,
           percentile_disc(0.95) WITHIN GROUP (ORDER BY decision_s) AS p95_s,
           max(decision_s) AS max_s
    FROM (SELECT category, date_part('epoch', resolved_at - created_at) AS decision_s
          FROM review_items WHERE status = 'resolved' AND resolved_at IS NOT NULL) AS r
    GROUP BY 1"""

_RAW_LATENCY = """
    SELECT (sent_at AT TIME ZONE 'UTC')::date AS day, decided_by, count(*) AS verdicts,
           percentile_disc(0.5) WITHIN GROUP (
               ORDER BY date_part('epoch', created_at - sent_at) * 1000) AS p50_ms,
           percentile_disc(0.95) WITHIN GROUP (
               ORDER BY date_part('epoch', created_at - sent_at) * 1000) AS p95_ms,
           max(date_part('epoch', created_at - sent_at) * 1000) AS max_ms,
           avg(queue_ms) AS avg_queue_ms, avg(inference_ms) AS avg_inference_ms
    FROM verdicts GROUP BY 1, 2"""

_RULES = {
    "spam": RuleHit("en.spam.link", "spam", Severity.MEDIUM, RuleAction.BLOCK),
    "slur": RuleHit("en.slur.1", "hate", Severity.HIGH, RuleAction.BLOCK),
    "insult": RuleHit("en.insult.2", "offensive", Severity.LOW, RuleAction.FLAG),
    "threat": RuleHit("en.threat.family", "threat", Severity.HIGH, RuleAction.FLAG),
    "self_harm": RuleHit("en.self_harm.intent", "self_harm", Severity.HIGH, RuleAction.FLAG),
    "minors": RuleHit(
        "en.sexual_minors.1", "sexual_exploitation_minors", Severity.CRITICAL, RuleAction.BLOCK
    ),
}
_BATCH = "00000000-0000-4000-8000-000000000025"
_HARMFUL = ModelScores((0.8, 0.1, 0.1), (0.7, 0.1, 0.1, 0.1), (0.05, 0.15, 0.8))
_BENIGN = ModelScores((0.1, 0.3, 0.6), (0.9, 0.05, 0.03, 0.02), (0.95, 0.04, 0.01))


async def _rows(conn: asyncpg.Connection[Any], sql: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r.values()) for r in await conn.fetch(sql))


async def _assert_rollups_match_raw(conn: asyncpg.Connection[Any]) -> None:
    """Every rollup view equals its raw aggregation; latency within the bucket bound."""
    for view, raw in _RAW.items():
        columns = [r["attname"] for r in await conn.fetch(_COLUMNS, view)]
        expected = await _rows(conn, f"SELECT {', '.join(columns)} FROM ({raw}) AS x")  # noqa: S608
        actual = await _rows(conn, f"SELECT {', '.join(columns)} FROM {view}")  # noqa: S608
        assert actual == expected, view
    exact = {(r["day"], r["decided_by"]): r for r in await conn.fetch(_RAW_LATENCY)}
    rolled = {
        (r["day"], r["decided_by"]): r
        for r in await conn.fetch("SELECT * FROM analytics_verdict_latency_daily")
    }
    assert rolled.keys() == exact.keys()
    for key, row in rolled.items():
        truth = exact[key]
        assert row["verdicts"] == truth["verdicts"], key
        for column in ("p50_ms", "p95_ms", "max_ms"):
            _assert_within_bucket(row[column], truth[column])
        assert row["avg_queue_ms"] == pytest.approx(truth["avg_queue_ms"], rel=1e-6)
        if truth["avg_inference_ms"] is None:
            assert row["avg_inference_ms"] is None
        else:
            assert row["avg_inference_ms"] == pytest.approx(truth["avg_inference_ms"], rel=1e-6)
    exact_times = {r["category"]: r for r in await conn.fetch(_RAW_REVIEW_TIMES)}
    rolled_times = {
        r["category"]: r for r in await conn.fetch("SELECT * FROM analytics_review_decision_times")
    }
    assert rolled_times.keys() == exact_times.keys()
    for category, row in rolled_times.items():
        truth = exact_times[category]
        assert row["decided"] == truth["decided"], category
        for column in ("p50_s", "p95_s", "max_s"):
            _assert_within_bucket(row[column] * 1000, truth[column] * 1000)


_COLUMNS = """
SELECT attname FROM pg_attribute
WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
"""


def _assert_within_bucket(estimate: float, exact: float) -> None:
    if exact < 1:
        assert estimate == 0
    else:
        assert exact / _BUCKET_BOUND * (1 - 1e-9) <= estimate <= exact * _BUCKET_BOUND * (1 + 1e-9)


async def _refresh(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        counted = await refresh_rollups(conn, page_rows=7)  # small pages: the paging is tested
    finally:
        await conn.close()
    assert counted is not None
    return counted


def _verdict(
    topic: str, offset: int, rng: random.Random, *, when: datetime, pending: bool = False
) -> Verdict:
    """One verdict of a varied mix: rule hits of every kind, model or rules or no model."""
    hits = tuple(
        _RULES[name] for name in rng.sample(sorted(_RULES), rng.choice((0, 0, 0, 1, 1, 2)))
    )
    outcome = RuleOutcome(tuple(sorted(hits, key=lambda h: -h.severity)))
    scores = None if pending else rng.choice((_HARMFUL, _BENIGN, _BENIGN))
    run = NO_MODEL if scores is None else ModelRun("moderation", rng.choice("12"), _BATCH, 30.0)
    skew = timedelta(seconds=rng.choice((-2, 0, 0, 0, 0))) + timedelta(
        milliseconds=rng.uniform(0, 900)
    )
    facts = MessageFacts(
        SourcePosition(topic, offset % 3, offset),
        f"m-{topic}-{offset}",
        f"g{rng.randrange(4)}",
        f"u{rng.randrange(9)}",
        when - skew,
        hashlib.sha256(str(offset).encode()).hexdigest(),
    )
    return make_verdict(
        facts, outcome, scores, PolicyThresholds(), run, queue_ms=rng.uniform(0, 50)
    )


async def _write(dsn: str, verdicts: list[Verdict], group: str) -> None:
    """Through the worker's store, with the escalations and pending texts the stream stores."""
    settings = WorkerSettings().postgres.model_copy(update={"dsn": SecretStr(dsn)})
    async with Database(settings) as database:
        await VerdictBatchStore(database, group).write(
            VerdictBatch(
                list(verdicts),
                escalations=[
                    Escalation(v, f"text {v.message_id}") for v in verdicts if v.result.escalate
                ],
                pending_texts=[
                    PendingText(v.position, v.sent_at, f"hello there {v.message_id}")
                    for v in verdicts
                    if v.result.decided_by.value == "pending_model"
                ],
            )
        )


@pytest.fixture
async def scoped(
    worker_settings: WorkerSettings,
) -> AsyncIterator[WorkerSettings]:
    """WorkerSettings for this test's topics and a database of its own (all migrations)."""
    async with temporary_database(worker_settings, prefix="modstream_test_rollups") as s:
        yield s


async def test_rollups_equal_raw_after_writes_rescoring_reviews_and_updates(
    scoped: WorkerSettings,
) -> None:
    """Through replays, ``modstream rescore``, moderators' decisions and a re-scan-like UPDATE,
    each refresh leaves every rollup view equal to the raw aggregation of the same rows."""
    dsn = scoped.postgres.dsn.get_secret_value()
    topic = scoped.kafka.input_topic
    rng = random.Random(25)
    now = datetime.now(UTC)
    days = [now - timedelta(days=d, hours=rng.randrange(3)) for d in (0, 0, 1, 2)]
    first = [_verdict(topic, i, rng, when=days[i % 4], pending=i % 5 == 0) for i in range(60)]
    await _write(dsn, first[:30], "g-a")
    await _write(dsn, first[:30], "g-a")  # a replay: inserts nothing twice
    assert await _refresh(dsn) == 30
    await _write(dsn, first[30:], "g-a")
    conn = await asyncpg.connect(dsn)
    try:
        await _assert_rollups_match_raw_after(conn, dsn, expect=30)
        # Re-scoring: half the pending rows were counted already, half never were.
        late = [_verdict(topic, 100 + i, rng, when=now, pending=True) for i in range(6)]
        await _write(dsn, late, "g-a")
        pending = await conn.fetchval(
            "SELECT count(*) FROM verdicts WHERE decided_by = 'pending_model'"
        )
        assert pending >= 10
        await _rescore(scoped)
        assert (
            await conn.fetchval("SELECT count(*) FROM verdicts WHERE decided_by = 'pending_model'")
            == 0
        )
        await _assert_rollups_match_raw_after(conn, dsn, expect=6 + pending)
        # Moderators decide every escalation; the job recomputes their hours' agreement.
        await _resolve_all(dsn, conn)
        await _assert_rollups_match_raw_after(conn, dsn, expect=0)
        # A re-scan: decisions, categories and rule hits of counted rows change in place.
        await conn.execute(
            "UPDATE verdicts SET decision = 'allow', category = NULL, rule_hits = '[]', "
            "escalated = false WHERE source_offset % 4 = 1"
        )
        await conn.execute(
            "UPDATE verdicts SET decision = 'block', category = 'threat', "
            'rule_hits = rule_hits || \'[{"rule_id": "en.threat.new", "category": '
            '"threat", "severity": "high", "action": "block"}]\' '
            "WHERE source_offset % 4 = 2"
        )
        # A hand-fixed escalation: resolved, but its decision time lost.
        await conn.execute(
            "UPDATE review_items SET resolved_at = NULL "
            "WHERE id = (SELECT min(id) FROM review_items WHERE status = 'resolved')"
        )
        changed = await conn.fetchval("SELECT count(*) FROM rollup_verdict_changes")
        assert changed > 0
        await _assert_rollups_match_raw_after(conn, dsn, expect=changed)
        # Marking rows published (every verdict, once) queues nothing.
        verdicts = [*first, *late]
        async with Database(scoped.postgres) as database:
            await VerdictOutboxStore(database).mark_published(
                [verdict_row_key(v) for v in verdicts]
            )
        assert await conn.fetchval("SELECT count(*) FROM verdicts WHERE NOT published") == 0
        assert await conn.fetchval("SELECT count(*) FROM rollup_verdict_changes") == 0
        freshness = await rollup_freshness(conn)
        assert freshness.covered_until is not None
        assert freshness.lag_s is not None
        assert freshness.lag_s >= 0
    finally:
        await conn.close()


async def _assert_rollups_match_raw_after(
    conn: asyncpg.Connection[Any], dsn: str, *, expect: int
) -> None:
    assert await _refresh(dsn) == expect
    await _assert_rollups_match_raw(conn)
    assert await _refresh(dsn) == 0  # nothing is counted twice


async def _rescore(s: WorkerSettings) -> None:
    """``modstream rescore`` (engine/rescore.py) against the real Triton and Kafka."""
    run = await run_rescore(s, s.kafka.input_topic)
    assert run.returncode == 0, run.stderr[-2000:]


async def _resolve_all(dsn: str, conn: asyncpg.Connection[Any]) -> None:
    settings = with_database(ReviewServiceSettings(), dsn.rsplit("/", 1)[1])
    pool = await asyncpg.create_pool(settings.postgres.dsn.get_secret_value(), min_size=1)
    try:
        queue = ReviewQueue(pool, settings.review)
        admin = User(id=1, name="ada", role=Role.ADMIN)
        items = await conn.fetch("SELECT public_id::text AS id FROM review_items ORDER BY id")
        assert len(items) >= 5
        actions = (Action.APPROVE, Action.BAN, Action.REMOVE_MESSAGE, Action.WARN)
        for i, item in enumerate(items):
            await queue.claim(admin, item["id"])
            await queue.decide(admin, item["id"], actions[i % len(actions)], "checked")
    finally:
        await pool.close()


async def test_a_transaction_that_commits_after_a_refresh_is_counted_once(
    scoped: WorkerSettings,
) -> None:
    """A verdict whose transaction is open while a refresh runs is counted by the next one:
    commit order never loses or doubles a row, and two refreshes never count the same rows."""
    dsn = scoped.postgres.dsn.get_secret_value()
    rng = random.Random(3)
    now = datetime.now(UTC)
    slow = await asyncpg.connect(dsn)
    try:
        tx = slow.transaction()
        await tx.start()
        await slow.execute(
            "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, "
            "message_id, group_id, sender_id, text_sha256, decision, decided_by) "
            "VALUES ('late', 0, 1, now(), 'late-1', 'g', 's', 'h', 'block', 'rules')"
        )
        await _write(dsn, [_verdict("quick", i, rng, when=now) for i in range(5)], "g-q")
        assert await _refresh(dsn) == 5  # the open transaction's row is not visible yet
        await tx.commit()
        await _write(dsn, [_verdict("quick", 10 + i, rng, when=now) for i in range(2)], "g-q")
        assert await _refresh(dsn) == 3
        assert await _refresh(dsn) == 0
        conn = await asyncpg.connect(dsn)
        try:
            await _assert_rollups_match_raw(conn)
            # A second refresh while one holds the job's lock does nothing and says so.
            holder = conn.transaction(isolation="repeatable_read")
            await holder.start()
            await conn.fetchval("SELECT modstream_rollups_refresh()")
            assert await refresh_rollups(slow) is None
            await holder.commit()
        finally:
            await conn.close()
    finally:
        await slow.close()


async def test_first_refresh_counts_rows_stored_before_the_migration(
    stack_settings: WorkerSettings,
) -> None:
    """Upgrading a database that holds verdicts: 0070 itself counts nothing (it only adds a
    column, indexes and functions), and the first refresh counts the older rows, which carry
    no rollup_xid, exactly once."""
    admin_dsn = stack_settings.postgres.dsn.get_secret_value()
    name = f"modstream_test_rollups_up_{random.randrange(1 << 32):08x}"
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = f"{admin_dsn.rpartition('/')[0]}/{name}"
    conn = await asyncpg.connect(dsn)
    try:
        migrations = discover(project_root() / "migrations")
        await apply_migrations(conn, [m for m in migrations if m.version < 70])
        rng = random.Random(5)
        now = datetime.now(UTC)
        # Today's writer names every column of today's verdicts; the ones added after 0070 that
        # it inserts (0093's model_spans, 0094's tenants) are there only while the old rows are
        # written.
        await conn.execute(
            "ALTER TABLE verdicts ADD COLUMN model_spans jsonb, ADD COLUMN tenant text;"
            "ALTER TABLE review_items ADD COLUMN tenant text"
        )
        await _write(dsn, [_verdict("old", i, rng, when=now) for i in range(9)], "g")
        await conn.execute(
            "ALTER TABLE verdicts DROP COLUMN model_spans, DROP COLUMN tenant;"
            "ALTER TABLE review_items DROP COLUMN tenant"
        )
        await apply_migrations(conn, migrations)
        assert await conn.fetchval("SELECT count(*) FROM rollup_verdicts_hourly") == 0
        assert await conn.fetchval("SELECT count(*) FROM verdicts WHERE rollup_xid IS NULL") == 9
        await _write(dsn, [_verdict("new", i, rng, when=now) for i in range(4)], "g")
        assert await _refresh(dsn) == 13
        assert await _refresh(dsn) == 0
        await _assert_rollups_match_raw(conn)
    finally:
        await conn.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_roles_run_the_job_and_read_the_views_only(
    scoped: WorkerSettings,
) -> None:
    """Least privilege: a worker login may run the refresh but not read or write a rollup
    table; an analyst login reads the views, not the tables, and cannot run the job."""
    dsn = scoped.postgres.dsn.get_secret_value()
    await _write(
        dsn, [_verdict("r", i, random.Random(i), when=datetime.now(UTC)) for i in range(3)], "g"
    )
    base, _, database = dsn.rpartition("/")
    host = base.rpartition("@")[2]
    worker = await asyncpg.connect(f"postgresql://modstream_worker_login@{host}/{database}")
    analyst = await asyncpg.connect(f"postgresql://modstream_analyst_login@{host}/{database}")
    try:
        assert await refresh_rollups(worker) == 3
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await worker.fetch("SELECT * FROM rollup_verdicts_hourly")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await worker.execute("DELETE FROM rollup_state")
        assert (
            await analyst.fetchval("SELECT sum(verdicts) FROM analytics_verdict_rates_hourly") == 3
        )
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await analyst.fetch("SELECT * FROM rollup_verdicts_daily")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await refresh_rollups(analyst)
    finally:
        await worker.close()
        await analyst.close()


async def test_sql_severe_categories_match_the_policy(scoped: WorkerSettings) -> None:
    """The SQL list of severe harm categories is pipelines.severe_harm's."""
    conn = await asyncpg.connect(scoped.postgres.dsn.get_secret_value())
    try:
        listed = await conn.fetchval("SELECT modstream_severe_categories()")
    finally:
        await conn.close()
    assert tuple(listed) == tuple(SEVERE_CATEGORIES)


async def test_latency_bucket_edges_are_the_documented_ones(scoped: WorkerSettings) -> None:
    """Bucket k holds [2^((k-1)/8), 2^(k/8)) ms, its estimate is the geometric middle, and the
    bucket function puts values on both sides of an edge where the table says."""
    conn = await asyncpg.connect(scoped.postgres.dsn.get_secret_value())
    try:
        rows = await conn.fetch("SELECT * FROM analytics_latency_buckets ORDER BY bucket")
        assert [r["bucket"] for r in rows] == list(range(242))
        for r in rows[1:-1]:
            k = r["bucket"]
            assert r["lower_ms"] == pytest.approx(2 ** ((k - 1) / 8))
            assert r["estimate_ms"] == pytest.approx(math.sqrt(r["lower_ms"] * r["upper_ms"]))
            inside = await conn.fetchval(
                "SELECT modstream_latency_bucket($1)", r["lower_ms"] * 1.0001
            )
            assert inside == k
        assert await conn.fetchval("SELECT modstream_latency_bucket(-5)") == 0
        assert await conn.fetchval("SELECT modstream_latency_bucket(0.99)") == 0
        assert await conn.fetchval("SELECT modstream_latency_bucket(1e12)") == 241
    finally:
        await conn.close()


async def test_retention_keeps_rollups_longer_than_raw_rows(scoped: WorkerSettings) -> None:
    """``modstream retention``: a verdict past ``--keep`` leaves the raw rows but stays in the
    rollups until ``--keep-rollups``; a shorter ``--keep-rollups`` than ``--keep`` is refused."""
    dsn = scoped.postgres.dsn.get_secret_value()
    rng = random.Random(9)
    now = datetime.now(UTC)
    await _write(dsn, [_verdict("ret", 0, rng, when=now - timedelta(days=200))], "g")
    await _write(dsn, [_verdict("ret", 1, rng, when=now - timedelta(days=500))], "g")
    assert await _refresh(dsn) == 2
    conn = await asyncpg.connect(dsn)
    try:
        await apply_retention(conn, timedelta(days=90))
        assert await conn.fetchval("SELECT count(*) FROM verdicts") == 0
        days = await conn.fetch("SELECT day FROM analytics_verdict_totals_daily")
        assert [r["day"] for r in days] == [(now - timedelta(days=200)).date()]
        with pytest.raises(RetentionError):
            await apply_retention(
                conn,
                timedelta(days=90),
                periods=RetentionPeriods(verdicts=timedelta(days=90), rollups=timedelta(days=30)),
            )
    finally:
        await conn.close()


async def test_the_worker_keeps_the_rollups_fresh(scoped: WorkerSettings) -> None:
    """A running worker refreshes the rollups by itself every ``rollups.refresh_interval_s``:
    the records it decides show up in the rollup views without anyone running the job."""
    s = scoped.model_copy(
        update={"rollups": scoped.rollups.model_copy(update={"refresh_interval_s": 0.2})}
    )
    records = list(sample_stream(40, seed=4, id_prefix="fresh"))
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
    try:

        async def counted() -> bool:
            if task.done():
                task.result()
            total = await conn.fetchval("SELECT sum(verdicts) FROM analytics_verdict_totals_daily")
            return total == len(records)

        await wait_until(counted, timeout_s=90)
        assert (await rollup_freshness(conn)).covered_until is not None
        await _assert_rollups_match_raw(conn)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
        await conn.close()
