"""Analyst views, the read-only role, the documented example queries and verdict retention."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from admin.retention import apply_retention
from common.rollups import refresh_rollups
from common.settings import project_root
from pipelines.severe_harm import SEVERE_CATEGORIES
from review.queue import ReviewQueue
from review.schemas import Action, Role, User
from review.settings import ReviewServiceSettings
from tests.support import temporary_database

pytestmark = pytest.mark.integration

_DOC = project_root() / "docs" / "analysts.md"


def example_queries() -> list[str]:
    """The ```sql blocks under "## Example queries" in docs/analysts.md, in order."""
    text = _DOC.read_text(encoding="utf-8")
    section = text.split("## Example queries", 1)[1]
    return re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL)


_QUERIES = example_queries()


@pytest.fixture(scope="module")
async def db(db_settings: ReviewServiceSettings) -> AsyncIterator[asyncpg.Pool[Any]]:
    pool = await asyncpg.create_pool(
        db_settings.postgres.dsn.get_secret_value(), min_size=1, max_size=4
    )
    await _seed(pool, db_settings)
    yield pool
    await pool.close()


@pytest.fixture(scope="module")
async def db_settings() -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(
        ReviewServiceSettings(), prefix="modstream_test_analysts"
    ) as settings:
        yield settings


async def _verdict(
    conn: Any,
    offset: int,
    *,
    group_id: str,
    sender_id: str,
    decision: str,
    category: str | None,
    rule_ids: list[str],
    model_version: str = "2",
    escalated: bool = False,
    sent_at: datetime | None = None,
    hit_categories: list[str] | None = None,
) -> datetime:
    sent = sent_at or datetime.now(UTC) - timedelta(minutes=30)
    categories = hit_categories or [category or "spam"] * len(rule_ids)
    hits = [
        {"rule_id": r, "category": c, "severity": "high", "action": "flag"}
        for r, c in zip(rule_ids, categories, strict=True)
    ]
    await conn.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, category, priority, "
        "rule_hits, scores, model_name, model_version, queue_ms, inference_ms, created_at) "
        "VALUES ('chat.messages', 0, $1, $2, $3, $4, $5, repeat('a', 64), $6, 'model', $7, $8, "
        '0.5, $9::jsonb, \'{"toxicity": {"none": 0.5, "offensive": 0.2, "hate": 0.3}}\', '
        "'moderation', $10, 12, 40, $2::timestamptz + interval '250 ms')",
        offset,
        sent,
        f"m{offset}",
        group_id,
        sender_id,
        decision,
        escalated,
        category,
        json.dumps(hits),
        model_version,
    )
    return sent


async def _seed(pool: asyncpg.Pool[Any], settings: ReviewServiceSettings) -> None:
    """Verdicts in two groups, two escalations decided through the review queue."""
    async with pool.acquire() as conn:
        await _verdict(
            conn, 1, group_id="g1", sender_id="a", decision="allow", category=None, rule_ids=[]
        )
        await _verdict(
            conn,
            2,
            group_id="g1",
            sender_id="b",
            decision="block",
            category="hate",
            rule_ids=["en.slur.1", "en.insult.2"],
        )
        await _verdict(
            conn,
            3,
            group_id="g2",
            sender_id="b",
            decision="flag",
            category="spam",
            rule_ids=["en.spam.link"],
        )
        items = []
        for offset, resolution in ((4, Action.BAN), (5, Action.APPROVE)):
            sent = await _verdict(
                conn,
                offset,
                group_id="g2",
                sender_id="c",
                decision="flag",
                category="hate",
                rule_ids=["en.slur.1"],
                escalated=True,
            )
            item_id = await conn.fetchval(
                "INSERT INTO review_items (source_topic, source_partition, source_offset, "
                "sent_at, message_id, group_id, sender_id, message_text, category, priority, "
                "auto_decision, created_at) VALUES ('chat.messages', 0, $1, $2, $3, 'g2', 'c', "
                "'secret words', 'hate', 0.6, 'flag', $2::timestamptz + interval '1 second') "
                "RETURNING public_id::text",
                offset,
                sent,
                f"m{offset}",
            )
            items.append((item_id, resolution))
    queue = ReviewQueue(pool, settings.review)
    mod = User(id=1, name="mia", role=Role.MODERATOR)
    for item_id, resolution in items:
        await queue.claim(mod, item_id)
        await queue.decide(mod, item_id, resolution, "seeded")
    await _seed_severe(pool)
    async with pool.acquire() as conn:
        assert await refresh_rollups(conn) is not None  # the views read the rollups


_SEVERE_BLOCKED = {"sexual_exploitation_minors", "sexual_exploitation", "self_harm_incitement"}


async def _seed_severe(pool: asyncpg.Pool[Any]) -> None:
    """One escalated verdict and one waiting review item per severe category; one verdict filed
    as hate with two threat hits."""
    async with pool.acquire() as conn:
        for offset, category in enumerate(SEVERE_CATEGORIES, start=20):
            sent = await _verdict(
                conn,
                offset,
                group_id="g3",
                sender_id=f"severe-{offset}",
                decision="block" if category in _SEVERE_BLOCKED else "flag",
                category=category,
                rule_ids=[f"sev.{category}"],
                escalated=True,
            )
            await conn.execute(
                "INSERT INTO review_items (source_topic, source_partition, source_offset, "
                "sent_at, message_id, group_id, sender_id, message_text, category, priority, "
                "auto_decision, created_at) VALUES ('chat.messages', 0, $1, $2, $3, 'g3', $4, "
                "'secret words', $5, 1.0, 'flag', $2::timestamptz + interval '1 second')",
                offset,
                sent,
                f"m{offset}",
                f"severe-{offset}",
                category,
            )
        await _verdict(
            conn,
            30,
            group_id="g3",
            sender_id="severe-30",
            decision="block",
            category="hate",
            rule_ids=["en.slur.9", "sev.threat.a", "sev.threat.b"],
            hit_categories=["hate", "threat", "threat"],
        )


def test_docs_hold_twelve_example_queries() -> None:
    """docs/analysts.md documents exactly twelve example queries."""
    assert len(_QUERIES) == 12


@pytest.mark.parametrize("index", range(12), ids=[f"query-{i + 1}" for i in range(12)])
async def test_example_query_runs_as_analyst(db: asyncpg.Pool[Any], index: int) -> None:
    """Each documented query runs as modstream_analyst and returns rows on the seeded data."""
    async with db.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE modstream_analyst")
        rows = await conn.fetch(_QUERIES[index])
    assert rows, f"example query {index + 1} returned nothing"


async def _as_analyst(conn: Any, sql: str) -> None:
    async with conn.transaction():
        await conn.execute("SET LOCAL ROLE modstream_analyst")
        await conn.execute(sql)


async def test_analyst_role_cannot_read_text_or_write(db: asyncpg.Pool[Any]) -> None:
    """The analyst role reads views only: no tables, no message text, no writes."""
    async with db.acquire() as conn:
        for sql in (
            "SELECT message_text FROM review_items",
            "SELECT * FROM verdicts",
            "SELECT reason FROM review_events",
            "INSERT INTO review_events (review_item_id, actor, action) VALUES (1, 'x', 'ban')",
            "DELETE FROM analytics_verdicts",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await _as_analyst(conn, sql)
        columns = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_name LIKE 'analytics_%'"
        )
    names = {c["column_name"] for c in columns}
    assert "message_text" not in names
    assert "text_sha256" not in names
    assert "reason" not in names


async def test_views_compute_agreement_rates_and_rule_ranks(db: asyncpg.Pool[Any]) -> None:
    """Agreement counts ban as agreeing with flag and approve as not; rules rank by hits."""
    agreement = await db.fetchrow(
        "SELECT decided, agreed, agreement_rate, model_harsher FROM analytics_model_agreement "
        "WHERE model_version = '2' AND category = 'hate'"
    )
    assert dict(agreement) == {
        "decided": 2,
        "agreed": 1,
        "agreement_rate": pytest.approx(0.5),
        "model_harsher": 1,
    }
    top = await db.fetch(
        "SELECT rule_id, hits, hit_rank FROM analytics_top_rules ORDER BY hit_rank"
    )
    assert (top[0]["rule_id"], top[0]["hits"], top[0]["hit_rank"]) == ("en.slur.1", 3, 1)
    rates = await db.fetch(
        "SELECT decision, verdicts, share_of_group_day FROM analytics_verdict_rates_daily "
        "WHERE group_id = 'g1' ORDER BY decision"
    )
    assert [(r["decision"], r["verdicts"]) for r in rates] == [("allow", 1), ("block", 1)]
    assert sum(r["share_of_group_day"] for r in rates) == pytest.approx(1)
    latency = await db.fetchrow(
        "SELECT sum(verdicts) AS n, max(p50_ms) AS p50 FROM analytics_verdict_latency_daily"
    )
    assert latency["n"] == 5 + len(SEVERE_CATEGORIES) + 1
    assert latency["p50"] == pytest.approx(250, rel=2 ** (1 / 16) - 1)  # a histogram bucket
    review = await db.fetchrow("SELECT decided FROM analytics_review_latency_daily")
    assert review["decided"] == 2


async def test_severe_harm_views_count_per_category(db: asyncpg.Pool[Any]) -> None:
    """Each severe category counts its verdicts once, whatever the filing; waiting items show."""
    rows = await db.fetch(
        "SELECT category, verdicts, blocked, flagged, escalated, senders "
        "FROM analytics_severe_harm_daily WHERE group_id = 'g3'"
    )
    daily = {r["category"]: dict(r) for r in rows}
    assert set(daily) == set(SEVERE_CATEGORIES)
    assert daily["threat"]["verdicts"] == 2  # its own verdict and the one filed as hate
    assert daily["threat"]["blocked"] == 1
    assert daily["threat"]["senders"] == 2
    assert daily["self_harm"] == {
        "category": "self_harm",
        "verdicts": 1,
        "blocked": 0,
        "flagged": 1,
        "escalated": 1,
        "senders": 1,
    }
    assert daily["sexual_exploitation_minors"]["blocked"] == 1
    assert not await db.fetchval(
        "SELECT count(*) FROM analytics_severe_harm_daily WHERE category IN ('hate', 'spam')"
    )
    review = await db.fetch(
        "SELECT category, waiting, resolved, oldest_waiting_s FROM analytics_severe_harm_review"
    )
    assert {r["category"]: (r["waiting"], r["resolved"]) for r in review} == dict.fromkeys(
        SEVERE_CATEGORIES, (1, 0)
    )
    assert all(r["oldest_waiting_s"] > 0 for r in review)


async def test_retention_drops_old_months_and_creates_upcoming(
    db_settings: ReviewServiceSettings,
) -> None:
    """--keep 90d drops whole old monthly partitions and old default rows, keeps recent ones."""
    conn = await asyncpg.connect(db_settings.postgres.dsn.get_secret_value())
    try:
        await conn.fetchval("SELECT modstream_ensure_verdict_partitions('2025-01-01', 2)")
        old = datetime(2025, 1, 15, tzinfo=UTC)
        ancient = datetime(2001, 1, 1, tzinfo=UTC)
        await _verdict(
            conn,
            100,
            group_id="old",
            sender_id="o",
            decision="allow",
            category=None,
            rule_ids=[],
            sent_at=old,
        )
        await _verdict(
            conn,
            101,
            group_id="old",
            sender_id="o",
            decision="allow",
            category=None,
            rule_ids=[],
            sent_at=ancient,
        )
        assert await conn.fetchval("SELECT count(*) FROM verdicts_2025_01") == 1
        before = await conn.fetchval("SELECT count(*) FROM verdicts WHERE group_id <> 'old'")

        dry = await apply_retention(conn, timedelta(days=90), dry_run=True)
        assert set(dry.dropped) >= {"verdicts_2025_01", "verdicts_2025_02"}
        assert await conn.fetchval("SELECT to_regclass('verdicts_2025_01') IS NOT NULL")

        now = datetime.now(UTC)
        report = await apply_retention(conn, timedelta(days=90), ahead_months=6)
        assert "verdicts_2025_01" in report.dropped
        assert report.default_rows_deleted == 1
        assert await conn.fetchval("SELECT to_regclass('verdicts_2025_01')") is None
        assert await conn.fetchval("SELECT count(*) FROM verdicts WHERE group_id = 'old'") == 0
        assert (
            await conn.fetchval("SELECT count(*) FROM verdicts WHERE group_id <> 'old'") == before
        )
        this_month = f"verdicts_{now:%Y_%m}"
        assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", this_month)
        far = now.replace(day=1) + timedelta(days=31 * 6)
        assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"verdicts_{far:%Y_%m}")
        again = await apply_retention(conn, timedelta(days=90), ahead_months=6)
        assert (again.dropped, again.partitions_created) == ((), 0)
    finally:
        await conn.close()
