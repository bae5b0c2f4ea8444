"""The conversation around an escalation, against the real PostgreSQL: the window, its texts
as retained and scoped, and the audit of every showing."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from review.auth import create_user
from review.queue import ReviewQueue
from review.schemas import Role, User
from review.settings import ReviewServiceSettings, ReviewSettings
from tests.support import temporary_database

pytestmark = pytest.mark.integration

ROOM = "room-ctx"
BASE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
async def db_settings() -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(
        ReviewServiceSettings(), prefix="modstream_test_conversation"
    ) as settings:
        yield settings


@pytest.fixture(scope="module")
async def pool(db_settings: ReviewServiceSettings) -> AsyncIterator[asyncpg.Pool[Any]]:
    the_pool = await asyncpg.create_pool(db_settings.postgres.dsn.get_secret_value())
    yield the_pool
    await the_pool.close()


@pytest.fixture(autouse=True)
async def _clean(pool: asyncpg.Pool[Any]) -> None:
    await pool.execute(
        "TRUNCATE review_events, review_items, review_users, pending_texts, verdicts "
        "RESTART IDENTITY CASCADE"
    )


async def _user(pool: asyncpg.Pool[Any], name: str, categories: list[str] | None = None) -> User:
    async with pool.acquire() as conn:
        await create_user(conn, name, Role.MODERATOR, categories)
    return User(
        id=await pool.fetchval("SELECT id FROM review_users WHERE name = $1", name),
        name=name,
        role=Role.MODERATOR,
        categories=None if categories is None else tuple(categories),
    )


async def _message(
    pool: asyncpg.Pool[Any],
    offset: int,
    minutes: float,
    sender: str,
    *,
    category: str | None = None,
    escalated_text: str | None = None,
    pending_text: str | None = None,
    group: str = ROOM,
) -> str | None:
    """One verdict ``minutes`` after ``BASE``; with ``escalated_text`` its review item (public
    id returned), with ``pending_text`` its pending text."""
    sent_at = BASE + timedelta(minutes=minutes)
    await pool.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, text_sha256, decision, decided_by, escalated, "
        "category, priority, rule_hits) VALUES ('chat.messages', 0, $1, $2, $3, $4, $5, "
        "repeat('0', 64), 'flag', 'model', $6, $7, 0.5, $8::jsonb)",
        offset,
        sent_at,
        f"m{offset}",
        group,
        sender,
        escalated_text is not None,
        category,
        json.dumps([]),
    )
    if pending_text is not None:
        await pool.execute(
            "INSERT INTO pending_texts (source_topic, source_partition, source_offset, sent_at, "
            "message_text) VALUES ('chat.messages', 0, $1, $2, $3)",
            offset,
            sent_at,
            pending_text,
        )
    if escalated_text is None:
        return None
    item: str = await pool.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, auto_decision) VALUES "
        "('chat.messages', 0, $1, $2, $3, $4, $5, $6, $7, 'flag') RETURNING public_id::text",
        offset,
        sent_at,
        f"m{offset}",
        group,
        sender,
        escalated_text,
        category,
    )
    return item


def _queue(pool: asyncpg.Pool[Any], **settings: Any) -> ReviewQueue:
    return ReviewQueue(pool, ReviewSettings(**settings))


async def _seed_room(pool: asyncpg.Pool[Any]) -> str:
    """A conversation: the escalated message (offset 5, sender ``bad``) among others."""
    await _message(pool, 1, 0, "bad", pending_text="too early for the window")
    await _message(pool, 2, 1, "kid", pending_text="hi, who are you?")
    await _message(pool, 3, 2, "bad", category="hate", escalated_text="old, cleared")
    await pool.execute(
        "UPDATE review_items SET message_text = '', text_cleared_at = now() WHERE source_offset = 3"
    )
    await _message(pool, 4, 3, "kid")  # not retained
    item = await _message(pool, 5, 4, "bad", category="grooming", escalated_text="the item")
    await _message(pool, 6, 5, "kid", category="sexual_minors", escalated_text="urgent one")
    await _message(pool, 7, 6, "bad", pending_text="what school do you go to")
    await _message(pool, 8, 7, "kid", pending_text="after the window")
    await _message(pool, 9, 4.5, "other", group="another-room", pending_text="other room")
    assert item is not None
    return item


async def test_the_claim_holder_sees_the_window_marked_by_sender(pool: asyncpg.Pool[Any]) -> None:
    """The holder of the claim sees the group's messages around the item, oldest first and
    bounded on both sides, each marked by sender, with texts only where they are retained and
    in the holder's queues; other groups never appear."""
    item = await _seed_room(pool)
    queue = _queue(pool, context_before=3, context_after=2)
    user = await _user(pool, "mod", categories=["grooming", "hate"])
    await queue.claim(user, item)
    ctx = await queue.context(user, item)
    window = [
        (m.message_id, m.sender_id, m.same_sender, m.is_item, m.text_state.value, m.text)
        for m in ctx.conversation
    ]
    assert window == [
        ("m2", "kid", False, False, "shown", "hi, who are you?"),
        ("m3", "bad", True, False, "cleared", None),
        ("m4", "kid", False, False, "not_retained", None),
        ("m5", "bad", True, True, "shown", "the item"),
        ("m6", "kid", False, False, "outside_queues", None),
        ("m7", "bad", True, False, "shown", "what school do you go to"),
    ]


async def test_every_showing_is_audited_with_the_messages_shown(pool: asyncpg.Pool[Any]) -> None:
    """Each view appends a ``view_text`` event naming the conversation's messages whose text it
    showed."""
    item = await _seed_room(pool)
    queue = _queue(pool, context_before=3, context_after=2)
    user = await _user(pool, "mod", categories=["grooming", "hate"])
    await queue.claim(user, item)
    await queue.context(user, item)
    details = await pool.fetchval(
        "SELECT details::text FROM review_events WHERE action = 'view_text' AND actor = 'mod'"
    )
    audit = json.loads(details)
    assert audit["conversation_texts"] == 2
    assert audit["conversation_message_ids"] == ["m2", "m7"]


async def test_without_the_claim_there_is_no_conversation(pool: asyncpg.Pool[Any]) -> None:
    """A moderator who does not hold the claim gets no conversation and no text view event."""
    item = await _seed_room(pool)
    queue = _queue(pool)
    holder = await _user(pool, "holder")
    other = await _user(pool, "other")
    await queue.claim(holder, item)
    ctx = await queue.context(other, item)
    assert ctx.text_visible is False
    assert ctx.conversation == []
    assert await pool.fetchval("SELECT count(*) FROM review_events WHERE actor = 'other'") == 0


async def test_the_window_stays_within_its_hours(pool: asyncpg.Pool[Any]) -> None:
    """Messages sent further from the item than ``context_hours`` are not in the window."""
    item = await _seed_room(pool)
    await _message(pool, 20, -180, "kid", pending_text="three hours before")
    queue = _queue(pool, context_before=50, context_after=50, context_hours=1)
    user = await _user(pool, "mod")
    await queue.claim(user, item)
    ids = [m.message_id for m in (await queue.context(user, item)).conversation]
    assert ids == ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"]


async def test_the_review_role_reads_the_window_with_its_own_grants(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any]
) -> None:
    """The review service's least-privilege role may read the window (the pending texts by
    their key and text, 0021), and still may not read the whole ``pending_texts`` row."""
    item = await _seed_room(pool)
    login = f"mstest_{secrets.token_hex(4)}_review"
    await pool.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE modstream_review')
    parts = urlsplit(db_settings.postgres.dsn.get_secret_value())
    dsn = urlunsplit(parts._replace(netloc=f"{login}@{parts.netloc.rpartition('@')[2]}"))
    try:
        review_pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
        try:
            queue = _queue(review_pool, context_before=3, context_after=2)
            user = await _user(pool, "mod")
            await queue.claim(user, item)
            shown = [m.text for m in (await queue.context(user, item)).conversation if m.text]
            assert shown == [
                "hi, who are you?",
                "the item",
                "urgent one",
                "what school do you go to",
            ]
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await review_pool.fetch("SELECT * FROM pending_texts")
        finally:
            await review_pool.close()
    finally:
        await pool.execute(f'DROP OWNED BY "{login}"')
        await pool.execute(f'DROP ROLE IF EXISTS "{login}"')
