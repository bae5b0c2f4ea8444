"""The console over HTTP (no browser): sign-in, cookie flags, CSRF, escaping, decide, audit."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from review.api import create_app
from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from tests.support import MemoryPublisher, temporary_database

pytestmark = pytest.mark.integration

_XSS = "<script>alert('x')</script> you are awful"


@pytest.fixture(scope="module")
async def db_settings() -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(
        ReviewServiceSettings(), prefix="modstream_test_console"
    ) as settings:
        yield settings


@pytest.fixture(scope="module")
async def pool(db_settings: ReviewServiceSettings) -> AsyncIterator[asyncpg.Pool[Any]]:
    the_pool = await asyncpg.create_pool(
        db_settings.postgres.dsn.get_secret_value(), min_size=1, max_size=4
    )
    yield the_pool
    await the_pool.close()


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
async def client(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> AsyncIterator[httpx.AsyncClient]:
    await pool.execute(
        "TRUNCATE review_decision_outbox, sender_strikes, review_events, review_items, "
        "review_sessions, review_users RESTART IDENTITY CASCADE"
    )
    app = create_app(db_settings, pool=pool, publisher=publisher)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://review.test"
        ) as http,
    ):
        yield http


async def _item(pool: asyncpg.Pool[Any], offset: int = 1) -> str:
    item_id: str = await pool.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision) "
        "VALUES ('chat.messages', 1, $1, $2, 'm', 'g', 's', $3, 'hate', 0.5, 'flag') "
        "RETURNING public_id::text",
        offset,
        datetime.now(UTC),
        _XSS,
    )
    return item_id


async def _sign_in(client: httpx.AsyncClient, pool: asyncpg.Pool[Any], name: str) -> str:
    async with pool.acquire() as conn:
        token = await create_user(conn, name, Role.MODERATOR)
    response = await client.post("/console/login", data={"token": token})
    assert response.status_code == 303
    assert response.headers["location"] == "/console/queue"
    return response.headers["set-cookie"]


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match is not None
    return match.group(1)


async def test_console_pages_need_a_session(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Without a session every console page redirects to sign-in and every form is refused."""
    item_id = await _item(pool)
    for path in ("/console/queue", f"/console/items/{item_id}", "/console/audit"):
        response = await client.get(path)
        assert (response.status_code, response.headers["location"]) == (303, "/console/login")
    client.cookies.set("modstream_session", "forged")
    response = await client.post(f"/console/items/{item_id}/claim", data={"csrf": "x"})
    assert (response.status_code, response.headers["location"]) == (303, "/console/login")
    assert (
        await pool.fetchval("SELECT status FROM review_items WHERE public_id = $1", item_id)
        == "open"
    )


async def test_sign_in_sets_a_hardened_cookie_and_refuses_bad_tokens(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """The session cookie is HttpOnly and SameSite=Strict; a wrong token gets 401 and no cookie."""
    bad = await client.post("/console/login", data={"token": "msr_nope"})
    assert bad.status_code == 401
    assert "set-cookie" not in bad.headers
    cookie = await _sign_in(client, pool, "ivy")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    stored = await pool.fetchval("SELECT id_sha256 FROM review_sessions")
    assert client.cookies["modstream_session"] != stored
    page = await client.get("/console/queue")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_forms_without_the_csrf_token_are_refused(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """A signed-in browser posting without the session's CSRF token changes nothing."""
    item_id = await _item(pool)
    await _sign_in(client, pool, "jo")
    response = await client.post(f"/console/items/{item_id}/claim", data={"csrf": "guess"})
    assert response.status_code == 422
    assert (
        await pool.fetchval("SELECT status FROM review_items WHERE public_id = $1", item_id)
        == "open"
    )


async def test_claim_decide_and_audit_through_the_console(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """Claim-next, decide with a reason, land on the audit page; text is escaped and blurred."""
    item_id = await _item(pool)
    await _sign_in(client, pool, "kim")
    queue = await client.get("/console/queue")
    claimed = await client.post("/console/claim-next", data={"csrf": _csrf(queue.text)})
    assert claimed.headers["location"] == f"/console/items/{item_id}"
    page = await client.get(f"/console/items/{item_id}")
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;" in page.text
    assert 'class="toxic" id="message-text"' in page.text
    assert 'data-key="r"' in page.text
    decided = await client.post(
        f"/console/items/{item_id}/decide",
        data={"csrf": _csrf(page.text), "action": "warn", "reason": "first warning"},
    )
    assert decided.headers["location"] == f"/console/audit?item_id={item_id}"
    audit = await client.get(decided.headers["location"])
    assert 'data-action="warn"' in audit.text
    assert "first warning" in audit.text
    assert len(publisher.records) == 1
    resolution = await pool.fetchval(
        "SELECT resolution FROM review_items WHERE public_id = $1", item_id
    )
    assert resolution == "warn"


async def test_an_item_a_rescan_closed_says_so_and_offers_no_claim(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """A closed item's page says a rescan closed it and has no claim or decide form."""
    item_id = await _item(pool)
    await pool.execute(
        "UPDATE review_items SET status = 'closed', closed_at = now() WHERE public_id = $1",
        item_id,
    )
    await _sign_in(client, pool, "kim")
    page = await client.get(f"/console/items/{item_id}")
    assert 'id="closed"' in page.text
    assert "a rescan no longer escalates this message" in page.text
    assert 'id="claim"' not in page.text
    assert 'id="decide-form"' not in page.text


async def test_sign_out_ends_the_session(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """After sign-out the old cookie no longer opens any page."""
    await _sign_in(client, pool, "lee")
    cookie = client.cookies["modstream_session"]
    queue = await client.get("/console/queue")
    out = await client.post("/console/logout", data={"csrf": _csrf(queue.text)})
    assert out.headers["location"] == "/console/login"
    client.cookies.set("modstream_session", cookie)
    again = await client.get("/console/queue")
    assert again.status_code == 303


async def test_the_claim_holder_sees_hits_marked_and_the_conversation(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """With the claim, the text shows what the rules matched as escaped, marked pieces, and the
    conversation lists the group's messages by sender; without it, neither appears."""
    await pool.execute("TRUNCATE verdicts, pending_texts")
    text = "<b>well</b> f.u.c.k y0u then"
    sent_at = datetime.now(UTC)
    hits = [{"rule_id": "en.kw", "category": "offensive", "severity": "high", "action": "flag",
             "spans": [[12, 23]]}]  # fmt: skip
    for offset, sender, moment in ((7, "s", sent_at), (6, "t", sent_at - timedelta(minutes=1))):
        await pool.execute(
            "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, "
            "message_id, group_id, sender_id, text_sha256, decision, decided_by, escalated, "
            "priority, rule_hits) VALUES ('chat.messages', 1, $1, $2, $3, 'g', $4, "
            "repeat('0', 64), 'flag', 'rules', true, 0.5, $5::jsonb)",
            offset,
            moment,
            f"m{offset}",
            sender,
            json.dumps(hits if offset == 7 else []),
        )
    await pool.execute(
        "INSERT INTO pending_texts (source_topic, source_partition, source_offset, sent_at, "
        "message_text) VALUES ('chat.messages', 1, 6, $1, 'who are <i>you</i>')",
        sent_at - timedelta(minutes=1),
    )
    item_id: str = await pool.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision) "
        "VALUES ('chat.messages', 1, 7, $1, 'm7', 'g', 's', $2, 'hate', 0.5, 'flag') "
        "RETURNING public_id::text",
        sent_at,
        text,
    )
    await _sign_in(client, pool, "lee")
    unclaimed = await client.get(f"/console/items/{item_id}")
    assert "<mark" not in unclaimed.text
    assert 'id="conversation"' not in unclaimed.text
    await client.post(f"/console/items/{item_id}/claim", data={"csrf": _csrf(unclaimed.text)})
    page = await client.get(f"/console/items/{item_id}")
    assert '&lt;b&gt;well&lt;/b&gt; <mark class="hit" title="en.kw">f.u.c.k y0u</mark> then' in (
        page.text
    )
    conversation = page.text.split('id="conversation"', 1)[1].split("</ol>", 1)[0]
    assert conversation.index("who are &lt;i&gt;you&lt;/i&gt;") < conversation.index("this message")
    assert conversation.count("same-sender") == 1
    assert conversation.count("other-sender") == 1
