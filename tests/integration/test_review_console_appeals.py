"""Appeals in the console over HTTP (no browser): the claim holder reads the statement (escaped,
audited as the API audits it) and the decision under appeal, and decides the appeal through the
API's own path; the original decider is refused with ``own_decision``."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from fastapi import FastAPI

from review.api import create_app
from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from tests.support import MemoryPublisher, temporary_database

pytestmark = pytest.mark.integration

_STATEMENT = (
    "<script>window.pwned = 1</script><img src=x onerror=\"alert('x')\"> "
    "I was quoting the person who insulted me & said so."
)
_ESCAPED = (
    "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;img src=x onerror=&#34;alert(&#39;x&#39;)"
    "&#34;&gt; I was quoting the person who insulted me &amp; said so."
)


@pytest.fixture(scope="module")
async def db_settings() -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(
        ReviewServiceSettings(), prefix="modstream_test_console_appeals"
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
async def app(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> AsyncIterator[FastAPI]:
    await pool.execute(
        "TRUNCATE appeals, review_decision_outbox, sender_strikes, review_events, review_items, "
        "review_sessions, review_users, verdicts RESTART IDENTITY CASCADE"
    )
    the_app = create_app(db_settings, pool=pool, publisher=publisher, consume_appeals_topic=False)
    async with the_app.router.lifespan_context(the_app):
        yield the_app


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://review.test")


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match is not None
    return match.group(1)


@contextlib.asynccontextmanager
async def _signed_in(app: FastAPI, token: str) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client with a console session of the token's user."""
    async with _client(app) as client:
        response = await client.post("/console/login", data={"token": token})
        assert response.status_code == 303
        yield client


async def _moderator(pool: asyncpg.Pool[Any], name: str) -> str:
    async with pool.acquire() as conn:
        return await create_user(conn, name, Role.MODERATOR)


async def _appeal(app: FastAPI, pool: asyncpg.Pool[Any]) -> tuple[str, str, str]:
    """alice mutes s1's message over the API; the platform appeals her decision with a hostile
    statement. The appeal's item id, the appeal id and alice's token."""
    sent_at = datetime.now(UTC) - timedelta(minutes=5)
    await pool.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, category, priority, "
        "reasons, rule_hits) VALUES ('chat.messages', 0, 1, $1, 'm1', 'g1', 's1', "
        "repeat('0', 64), 'flag', 'rules', true, 'offensive', 0.5, '{rule:en.insult}', $2::jsonb)",
        sent_at,
        json.dumps([{"rule_id": "en.insult", "category": "offensive", "severity": "medium",
                     "action": "flag"}]),
    )  # fmt: skip
    item_id: str = await pool.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision, "
        "reasons) VALUES ('chat.messages', 0, 1, $1, 'm1', 'g1', 's1', 'you absolute clown', "
        "'offensive', 0.5, 'flag', '{rule:en.insult}') RETURNING public_id::text",
        sent_at,
    )
    alice = await _moderator(pool, "alice")
    async with pool.acquire() as conn:
        platform = await create_user(conn, "chat-server", Role.PLATFORM)
    async with _client(app) as api:
        alice_auth = {"Authorization": f"Bearer {alice}"}
        assert (await api.post(f"/api/items/{item_id}/claim", headers=alice_auth)).is_success
        decided = await api.post(
            f"/api/items/{item_id}/decide",
            headers=alice_auth,
            json={"action": "mute", "reason": "personal abuse"},
        )
        assert decided.status_code == 200, decided.text
        filed = await api.post(
            "/api/appeals",
            headers={"Authorization": f"Bearer {platform}"},
            json={
                "appeal_id": "console-1",
                "decision_id": decided.json()["decision_id"],
                "appellant_id": "s1",
                "statement": _STATEMENT,
            },
        )
        assert filed.status_code == 201, filed.text
    return filed.json()["item_id"], filed.json()["appeal_id"], alice


async def test_the_claim_holder_reads_the_statement_escaped_and_audited(
    app: FastAPI, pool: asyncpg.Pool[Any]
) -> None:
    """Before the claim: no statement, a hint; after it: the statement as text (never markup),
    the decision under appeal with alice's reason, no action buttons but the two outcomes, and a
    ``view_text`` event marked ``appeal_statement`` as the API records it."""
    item_id, appeal_id, _ = await _appeal(app, pool)
    async with _signed_in(app, await _moderator(pool, "bob")) as bob:
        before = await bob.get(f"/console/items/{item_id}")
        assert before.status_code == 200
        assert 'id="statement-hidden"' in before.text
        assert "I was quoting" not in before.text
        assert 'id="original-moderator">alice<' in before.text
        claimed = await bob.post(
            f"/console/items/{item_id}/claim", data={"csrf": _csrf(before.text)}
        )
        assert claimed.headers["location"] == f"/console/items/{item_id}"
        page = await bob.get(f"/console/items/{item_id}")
    assert f'data-appeal-id="{appeal_id}"' in page.text
    assert f'<blockquote class="statement" id="appeal-statement">{_ESCAPED}</blockquote>' in (
        page.text
    )
    assert "<script>window" not in page.text
    assert "<img src=x" not in page.text
    assert 'id="original-action">mute<' in page.text
    assert 'id="original-reason">personal abuse<' in page.text
    assert 'id="original-events"' in page.text
    assert "you absolute clown" in page.text
    assert 'id="appeal-form"' in page.text
    assert 'id="appeal-upheld"' in page.text
    assert 'id="appeal-reversed"' in page.text
    assert 'id="decide-form"' not in page.text
    assert 'data-key="r"' not in page.text
    views = await pool.fetch(
        "SELECT e.actor, e.details FROM review_events e JOIN review_items r "
        "ON r.id = e.review_item_id WHERE r.public_id = $1 AND e.action = 'view_text'",
        item_id,
    )
    assert [(v["actor"], json.loads(v["details"])["appeal_statement"]) for v in views] == [
        ("bob", True)
    ]


async def test_the_original_decider_is_refused_and_a_second_moderator_reverses(
    app: FastAPI, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """alice's claim and outcome are refused with ``own_decision`` (the error page says why);
    bob's outcome needs a reason and an outcome, then reverses the mute exactly as the API
    would: strikes lifted, the correction published, the decision counted in /metrics."""
    item_id, appeal_id, alice_token = await _appeal(app, pool)
    published = len(publisher.records)  # alice's decision
    bob_token = await _moderator(pool, "bob")
    async with _signed_in(app, alice_token) as alice, _signed_in(app, bob_token) as bob:
        page = await alice.get(f"/console/items/{item_id}")
        refused = await alice.post(
            f"/console/items/{item_id}/claim", data={"csrf": _csrf(page.text)}
        )
        assert refused.status_code == 403
        assert '<p class="error" role="alert" id="error-code">own_decision</p>' in refused.text
        assert "this appeal contests your own decision" in refused.text

        page = await bob.get(f"/console/items/{item_id}")
        await bob.post(f"/console/items/{item_id}/claim", data={"csrf": _csrf(page.text)})
        page = await bob.get(f"/console/items/{item_id}")
        csrf = _csrf(page.text)
        # alice, even with a form of her own session, cannot decide bob's claim.
        alice_page = await alice.get(f"/console/items/{item_id}")
        tried = await alice.post(
            f"/console/items/{item_id}/appeal-outcome",
            data={"csrf": _csrf(alice_page.text), "outcome": "reversed", "reason": "mine"},
        )
        assert tried.status_code == 403
        assert 'id="error-code">own_decision<' in tried.text
        forged = await bob.post(
            f"/console/items/{item_id}/appeal-outcome",
            data={"csrf": "guess", "outcome": "reversed", "reason": "x"},
        )
        assert forged.status_code == 422
        no_reason = await bob.post(
            f"/console/items/{item_id}/appeal-outcome",
            data={"csrf": csrf, "outcome": "reversed", "reason": "  "},
        )
        assert no_reason.status_code == 422
        assert 'id="error-code">invalid_decision<' in no_reason.text
        no_outcome = await bob.post(
            f"/console/items/{item_id}/appeal-outcome",
            data={"csrf": csrf, "outcome": "approve", "reason": "fine"},
        )
        assert no_outcome.status_code == 422
        assert await pool.fetchval("SELECT status FROM appeals") == "open"
        assert len(publisher.records) == published

        decided = await bob.post(
            f"/console/items/{item_id}/appeal-outcome",
            data={"csrf": csrf, "outcome": "reversed", "reason": "quoted abuse <b>only</b>"},
        )
        assert decided.status_code == 303
        assert decided.headers["location"] == f"/console/audit?item_id={item_id}"
        audit = await bob.get(decided.headers["location"])
        assert 'data-action="reversed"' in audit.text
        assert "quoted abuse &lt;b&gt;only&lt;/b&gt;" in audit.text
        resolved = await bob.get(f"/console/items/{item_id}")
        assert 'id="appeal-outcome"><b>reversed</b> by bob' in resolved.text
        assert 'id="appeal-form"' not in resolved.text
        metrics = (await bob.get("/metrics")).text

    appeal = await pool.fetchrow("SELECT * FROM appeals")
    assert appeal is not None
    assert (appeal["status"], appeal["decided_by"], appeal["strikes_lifted"]) == (
        "reversed",
        "bob",
        2,
    )
    assert str(appeal["public_id"]) == appeal_id
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM sender_strikes WHERE sender_id = 's1' AND expires_at > now()"
        )
        == 0
    )
    assert len(publisher.records) == published + 1
    correction = orjson.loads(publisher.records[-1][1])
    assert correction["type"] == "appeal_outcome"
    assert correction["action"] == "appeal_reversed"
    assert correction["moderator"] == "bob"
    assert correction["corrects"]["moderator"] == "alice"
    assert "statement" not in correction
    assert await pool.fetchval(
        "SELECT published_at IS NOT NULL FROM review_decision_outbox WHERE decision_id = $1",
        appeal["correction_id"],
    )
    assert (
        'modstream_review_appeals_decided_total{category="offensive",outcome="reversed"} 1.0'
        in metrics
    )
