"""`modstream retention` beyond verdicts: message text and the ledgers, each after its period."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from admin.retention import RetentionPeriods, apply_retention
from common.settings import ServiceSettings
from tests.support import temporary_database

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=45)
RECENT = NOW - timedelta(days=2)


async def _item(
    conn: asyncpg.Connection[Any], offset: int, status: str, resolved: datetime | None
) -> None:
    await conn.execute(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, auto_decision, status, resolved_at, "
        "resolution, resolved_by) VALUES ('t', 0, $1, $2, $3, 'g', 's', 'the words', 'flag', $4, "
        "$5, CASE WHEN $4 = 'resolved' THEN 'approve' END, CASE WHEN $4 = 'resolved' THEN 'm' END)",
        offset,
        OLD,
        f"m{offset}",
        status,
        resolved,
    )


async def _strike(
    conn: asyncpg.Connection[Any], offset: int, *, created: datetime, expires: datetime
) -> None:
    await conn.execute(
        "INSERT INTO sender_strikes (sender_id, group_id, weight, review_item_id, created_at, "
        "action, expires_at) SELECT 's', 'g', 1, id, $2, 'warn', $3 FROM review_items "
        "WHERE source_offset = $1",
        offset,
        created,
        expires,
    )


async def _seed(conn: asyncpg.Connection[Any]) -> None:
    await _item(conn, 1, "resolved", OLD)  # text goes
    await _item(conn, 2, "resolved", RECENT)  # decided lately: text stays
    await _item(conn, 3, "open", None)  # still waiting for a human: text stays
    for offset, created in ((1, OLD), (2, RECENT)):
        await conn.execute(
            "INSERT INTO pending_texts (source_topic, source_partition, source_offset, sent_at, "
            "message_text, created_at) VALUES ('t', 0, $1, $2, 'pending words', $2)",
            offset,
            created,
        )
        await conn.execute(
            "INSERT INTO dead_letters (source_topic, source_partition, source_offset, reason_code, "
            "reason, value_bytes, created_at) VALUES ('t', 0, $1, 'bad_json', 'x', 3, $2)",
            offset,
            NOW - timedelta(days=120) if offset == 1 else RECENT,
        )
    await _strike(conn, 1, created=OLD - timedelta(days=30), expires=OLD)
    await _strike(conn, 2, created=RECENT, expires=NOW + timedelta(days=28))


async def test_text_and_ledgers_are_pruned_after_their_periods() -> None:
    """Old resolved texts are cleared (rows kept), open and recent ones stay; old pending texts,
    dead letters and long-expired strikes go; a dry run counts the same and changes nothing."""
    async with temporary_database(ServiceSettings(), prefix="modstream_test_retention") as s:
        conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
        try:
            await _seed(conn)
            dry = await apply_retention(conn, timedelta(days=90), dry_run=True)
            assert await conn.fetchval("SELECT count(*) FROM dead_letters") == 2
            report = await apply_retention(conn, timedelta(days=90), periods=RetentionPeriods())
            assert report.ledgers == dry.ledgers
            texts = dict(
                await conn.fetch("SELECT source_offset, message_text FROM review_items ORDER BY 1")
            )
            assert texts == {1: "", 2: "the words", 3: "the words"}
            cleared = await conn.fetchval(
                "SELECT text_cleared_at IS NOT NULL FROM review_items WHERE source_offset = 1"
            )
            assert cleared
            assert report.ledgers["review_texts_cleared"] == 1
            for table, left in (("pending_texts", 1), ("dead_letters", 1), ("sender_strikes", 1)):
                count = await conn.fetchval(f"SELECT count(*) FROM {table}")  # noqa: S608
                assert count == left, table
            again = await apply_retention(conn, timedelta(days=90))
            assert again.ledgers["review_texts_cleared"] == 0
        finally:
            await conn.close()


async def test_the_text_of_items_a_rescan_closed_is_cleared_like_resolved_ones() -> None:
    """An item a rescan closed long ago loses its text (row kept); one closed lately keeps it."""
    async with temporary_database(ServiceSettings(), prefix="modstream_test_retention") as s:
        conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
        try:
            for offset, closed in ((1, OLD), (2, RECENT)):
                await _item(conn, offset, "open", None)
                await conn.execute(
                    "UPDATE review_items SET status = 'closed', closed_at = $2 "
                    "WHERE source_offset = $1",
                    offset,
                    closed,
                )
            report = await apply_retention(conn, timedelta(days=90), periods=RetentionPeriods())
            texts = dict(
                await conn.fetch("SELECT source_offset, message_text FROM review_items ORDER BY 1")
            )
            assert texts == {1: "", 2: "the words"}
            assert report.ledgers["closed_review_texts_cleared"] == 1
        finally:
            await conn.close()


async def test_the_statement_of_an_appeal_decided_long_ago_is_cleared() -> None:
    """An appeal decided before --keep-text loses its statement (the row stays); one decided
    lately and one still open keep theirs."""
    async with temporary_database(ServiceSettings(), prefix="modstream_test_retention") as s:
        conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
        try:
            for offset, decided in ((1, OLD), (2, RECENT), (3, None)):
                item = await conn.fetchval(
                    "SELECT id FROM modstream_open_appeal_item(now(), 'm', 'g', 's', 'x', NULL, "
                    "0, 'block', '{}', 'default')"
                )
                await conn.execute(
                    "INSERT INTO appeals (appeal_key, channel, filed_by, appellant_id, "
                    "statement, source_topic, source_partition, source_offset, sent_at, "
                    "message_id, group_id, sender_id, original_decision, original_decided_by, "
                    "review_item_id, due_at, status, decided_by, decided_at) VALUES "
                    "($1::text, 'api', 'p', 's', 'my words', 't', 0, $2, now(), 'm', 'g', 's', "
                    "'block', 'rules', $3, now(), $4, $5, $6)",
                    f"a{offset}",
                    offset,
                    item,
                    "open" if decided is None else "upheld",
                    None if decided is None else "mod",
                    decided,
                )
            report = await apply_retention(conn, timedelta(days=90), periods=RetentionPeriods())
            statements = dict(
                await conn.fetch("SELECT source_offset, statement FROM appeals ORDER BY 1")
            )
            assert statements == {1: "", 2: "my words", 3: "my words"}
            assert report.ledgers["appeal_statements_cleared"] == 1
        finally:
            await conn.close()


async def test_unpublished_decisions_are_never_pruned() -> None:
    """Published decision-outbox rows go after --keep-outbox; unpublished ones stay, however old."""
    async with temporary_database(ServiceSettings(), prefix="modstream_test_retention") as s:
        conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
        try:
            await _item(conn, 9, "resolved", OLD)
            event = await conn.fetchval(
                "INSERT INTO review_events (review_item_id, actor, action) "
                "SELECT id, 'm', 'approve' FROM review_items RETURNING id"
            )
            for published in (OLD, None):
                await conn.execute(
                    "INSERT INTO review_decision_outbox (decision_id, review_event_id, "
                    "message_key, payload, created_at, published_at) "
                    "VALUES ($1, $2, 'g', '{}', $3, $4)",
                    uuid.uuid4(),
                    event,
                    OLD,
                    published,
                )
            report = await apply_retention(conn, timedelta(days=90))
            assert report.ledgers["published_decisions"] == 1
            left = await conn.fetchval(
                "SELECT count(*) FROM review_decision_outbox WHERE published_at IS NULL"
            )
            assert left == 1
        finally:
            await conn.close()
