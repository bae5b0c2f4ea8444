"""The review API against the real PostgreSQL: auth, queue order, claims, decisions, context."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from review.api import create_app
from review.auth import create_user
from review.errors import ClaimLimitError, ItemClaimedError, PublishRefusedError
from review.queue import ReviewQueue
from review.schemas import QueueFilter, Role, User
from review.settings import ReviewServiceSettings, ReviewSettings
from tests.support import MemoryPublisher, temporary_database

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def db_settings() -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(
        ReviewServiceSettings(), prefix="modstream_test_review"
    ) as settings:
        yield settings


@pytest.fixture(scope="module")
async def pool(db_settings: ReviewServiceSettings) -> AsyncIterator[asyncpg.Pool[Any]]:
    the_pool = await asyncpg.create_pool(
        db_settings.postgres.dsn.get_secret_value(), min_size=2, max_size=24
    )
    yield the_pool
    await the_pool.close()


@pytest.fixture(autouse=True)
async def _clean(pool: asyncpg.Pool[Any]) -> None:
    await pool.execute(
        "TRUNCATE review_decision_outbox, sender_strikes, review_events, review_items, "
        "review_sessions, review_users, verdicts RESTART IDENTITY CASCADE"
    )


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
async def client(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(db_settings, pool=pool, publisher=publisher)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://review.test"
        ) as http,
    ):
        yield http


async def _token(pool: asyncpg.Pool[Any], name: str, role: Role = Role.MODERATOR) -> str:
    async with pool.acquire() as conn:
        return await create_user(conn, name, role)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


_offset = 0


async def seed(
    pool: asyncpg.Pool[Any],
    *,
    priority: float = 0.5,
    category: str = "hate",
    group_id: str = "g1",
    sender_id: str = "s1",
    hate: float = 0.6,
    age_s: float = 0.0,
    queue: str = "moderator",
    text: str = "you are awful",
    harms: dict[str, float] | None = None,
) -> str:
    """Insert one verdict and its escalation (``harms``: scores of a model with that output);
    returns the review item's public id."""
    global _offset
    _offset += 1
    sent_at = datetime.now(UTC) - timedelta(seconds=age_s + 1)
    scores = {
        "sentiment": {"negative": 0.8, "neutral": 0.1, "positive": 0.1},
        "intent": {"chat": 0.9, "question": 0.05, "spam": 0.03, "advertisement": 0.02},
        "toxicity": {"none": 1 - hate, "offensive": 0.0, "hate": hate},
    }
    if harms is not None:
        scores["harms"] = harms
    rule_hits = [
        {"rule_id": "en.insult.1", "category": "offensive", "severity": 2, "action": "flag"}
    ]
    await pool.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, category, priority, "
        "reasons, rule_hits, scores, model_name, model_version, created_at) VALUES "
        "('chat.messages', 0, $1, $2, $3, $4, $5, repeat('0', 64), 'flag', 'model', true, $6, $7, "
        "'{grey_zone}', $8::jsonb, $9::jsonb, 'moderation', '3', "
        "$2::timestamptz + interval '20 ms')",
        _offset,
        sent_at,
        f"m{_offset}",
        group_id,
        sender_id,
        category,
        priority,
        json.dumps(rule_hits),
        json.dumps(scores),
    )
    item_id: str = await pool.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision, "
        "reasons, queue, created_at) VALUES ('chat.messages', 0, $1, $2, $3, $4, $5, $6, $7, $8, "
        "'flag', '{grey_zone}', $9, $2) RETURNING public_id::text",
        _offset,
        sent_at,
        f"m{_offset}",
        group_id,
        sender_id,
        text,
        category,
        priority,
        queue,
    )
    return item_id


async def test_every_api_route_refuses_anonymous_and_bad_tokens(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """No token, a malformed token and a revoked user's token all get 401 on every /api route."""
    # Dozens of bad tokens from one address: lift the sign-in limit (test_review_hostile covers it).
    review = db_settings.review.model_copy(update={"sign_in_attempts_per_minute": 1000})
    app = create_app(
        db_settings.model_copy(update={"review": review}), pool=pool, publisher=publisher
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://review.test"
        ) as client,
    ):
        await _refuses_every_route(client, pool)


async def _refuses_every_route(client: httpx.AsyncClient, pool: asyncpg.Pool[Any]) -> None:
    item_id = await seed(pool)
    token = await _token(pool, "gone")
    await pool.execute("UPDATE review_users SET disabled_at = now() WHERE name = 'gone'")
    routes = [
        ("GET", "/api/me"),
        ("GET", "/api/queue"),
        ("GET", "/api/queue/counts"),
        ("POST", "/api/queue/claim-next"),
        ("GET", "/api/claims"),
        ("GET", f"/api/items/{item_id}"),
        ("POST", f"/api/items/{item_id}/claim"),
        ("POST", f"/api/items/{item_id}/release"),
        ("GET", "/api/events"),
        ("GET", "/api/senders/s1/strikes"),
        ("GET", "/api/users"),
        ("GET", "/api/openapi.json"),
    ]
    for headers in ({}, _auth("msr_not-a-real-token"), _auth(token), {"Authorization": token}):
        for method, path in routes:
            response = await client.request(method, path, headers=headers)
            assert response.status_code == 401, (method, path, headers.keys())
        response = await client.post(
            f"/api/items/{item_id}/decide",
            headers=headers,
            json={"action": "approve", "reason": "fine"},
        )
        assert response.status_code == 401
    assert await pool.fetchval("SELECT count(*) FROM review_events") == 0


async def test_wrong_role_is_refused(client: httpx.AsyncClient, pool: asyncpg.Pool[Any]) -> None:
    """Moderators get 403 on admin-only routes and on items escalated to admins; admins do not."""
    mod = _auth(await _token(pool, "mod"))
    admin = _auth(await _token(pool, "boss", Role.ADMIN))
    admin_item = await seed(pool, queue="admin")
    assert (await client.get("/api/users", headers=mod)).status_code == 403
    assert (await client.get("/api/queue?queue=admin", headers=mod)).status_code == 403
    assert (await client.post(f"/api/items/{admin_item}/claim", headers=mod)).status_code == 403
    assert (await client.get(f"/api/items/{admin_item}", headers=mod)).status_code == 403
    assert (await client.get("/api/queue", headers=mod)).json() == []

    users = await client.get("/api/users", headers=admin)
    assert users.status_code == 200
    assert {u["name"] for u in users.json()} == {"mod", "boss"}
    assert "token" not in users.text
    assert [i["id"] for i in (await client.get("/api/queue", headers=admin)).json()] == [admin_item]
    assert (await client.post(f"/api/items/{admin_item}/claim", headers=admin)).status_code == 200


async def test_tokens_are_stored_only_as_digests(pool: asyncpg.Pool[Any]) -> None:
    """The users table holds a SHA-256 digest, never the token it was made from."""
    token = await _token(pool, "carol")
    dump = await pool.fetchval("SELECT string_agg(t::text, ',') FROM review_users t")
    assert token not in dump
    assert len(await pool.fetchval("SELECT token_sha256 FROM review_users")) == 64


async def test_queue_orders_by_priority_strikes_confidence_and_filters(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Rank = priority + repeat-offender boost; ties go to higher confidence; filters narrow."""
    headers = _auth(await _token(pool, "mod"))
    low = await seed(pool, priority=0.40, sender_id="clean", category="spam", group_id="g2")
    high = await seed(pool, priority=0.90, sender_id="clean")
    repeat = await seed(pool, priority=0.40, sender_id="repeat")
    confident = await seed(pool, priority=0.40, sender_id="clean2", hate=0.84)
    old = await seed(pool, priority=0.10, sender_id="clean3", age_s=7200)
    resolved = await seed(pool, priority=1.0)
    await pool.execute("UPDATE review_items SET status = 'resolved' WHERE public_id = $1", resolved)
    # Three live strikes for "repeat": +0.3 rank.
    for _ in range(3):
        await pool.execute(
            "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, weight, "
            "expires_at) VALUES ('repeat', 'g1', "
            "(SELECT id FROM review_items WHERE public_id = $1), 'warn', 1, "
            "now() + interval '1 day')",
            resolved,
        )
    # An expired strike does not count.
    await pool.execute(
        "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, weight, "
        "expires_at) VALUES ('clean', 'g1', (SELECT id FROM review_items WHERE public_id = $1), "
        "'ban', 3, now() - interval '1 second')",
        resolved,
    )
    listing = (await client.get("/api/queue", headers=headers)).json()
    assert [i["id"] for i in listing] == [high, repeat, confident, low, old]
    by_id = {i["id"]: i for i in listing}
    assert by_id[repeat]["sender_strikes"] == 3
    assert by_id[high]["sender_strikes"] == 0
    assert by_id[confident]["confidence"] == pytest.approx(0.84)
    assert by_id[old]["rank"] > 0.10  # the age boost

    spam = (await client.get("/api/queue?category=spam", headers=headers)).json()
    assert [i["id"] for i in spam] == [low]
    g2 = (await client.get("/api/queue?group_id=g2", headers=headers)).json()
    assert [i["id"] for i in g2] == [low]
    aged = (await client.get("/api/queue?min_age_s=3600", headers=headers)).json()
    assert [i["id"] for i in aged] == [old]
    fresh = (await client.get("/api/queue?max_age_s=600", headers=headers)).json()
    assert old not in [i["id"] for i in fresh]

    counts = (await client.get("/api/queue/counts", headers=headers)).json()
    assert {(c["queue"], c["category"]): c["open"] for c in counts} == {
        ("moderator", "hate"): 4,
        ("moderator", "spam"): 1,
    }


async def test_urgent_severe_categories_come_first(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any]
) -> None:
    """Own self-harm and minors items outrank any rank boost; other severe categories do not."""
    queue = ReviewQueue(pool, db_settings.review)
    boosted = await seed(pool, priority=0.99, sender_id="repeat", hate=0.95, age_s=7200)
    threat = await seed(pool, priority=0.85, category="threat")
    minors = await seed(pool, priority=0.50, category="sexual_exploitation_minors", hate=0.0)
    own = await seed(pool, priority=0.60, category="self_harm", hate=0.0)
    for _ in range(3):
        await pool.execute(
            "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, weight, "
            "expires_at) SELECT 'repeat', 'g1', id, 'warn', 1, now() + interval '1 day' "
            "FROM review_items WHERE public_id = $1::uuid",
            boosted,
        )
    mod = User(id=1, name="mia", role=Role.MODERATOR)
    listing = await queue.list_items(mod, QueueFilter())
    assert [item.id for item in listing] == [own, minors, boosted, threat]
    first = await queue.claim_next(mod, QueueFilter())
    assert first is not None
    assert first.item_id == own


async def test_claim_is_exclusive_under_concurrency(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any]
) -> None:
    """Twelve moderators claiming one item at once: exactly one wins, the rest get item_claimed."""
    queue = ReviewQueue(pool, db_settings.review)
    item_id = await seed(pool)
    users = [User(id=i, name=f"m{i}", role=Role.MODERATOR) for i in range(12)]
    results = await asyncio.gather(
        *(queue.claim(u, item_id) for u in users), return_exceptions=True
    )
    wins = [r for r in results if not isinstance(r, BaseException)]
    assert len(wins) == 1
    assert all(isinstance(r, ItemClaimedError) for r in results if isinstance(r, BaseException))
    holder = await pool.fetchval(
        "SELECT claimed_by FROM review_items WHERE public_id = $1", item_id
    )
    assert holder == wins[0].claimed_by


async def test_claim_next_never_hands_one_item_to_two_moderators(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any]
) -> None:
    """Ten concurrent claim-next calls over five items: five distinct claims, five empty answers."""
    queue = ReviewQueue(pool, db_settings.review)
    items = {await seed(pool, priority=0.1 * i) for i in range(5)}
    users = [User(id=i, name=f"m{i}", role=Role.MODERATOR) for i in range(10)]
    from review.schemas import QueueFilter

    results = await asyncio.gather(*(queue.claim_next(u, QueueFilter()) for u in users))
    claimed = [r.item_id for r in results if r is not None]
    assert sorted(claimed) == sorted(items)
    assert results.count(None) == 5
    rows = await pool.fetch("SELECT id, claimed_by FROM review_items WHERE status = 'claimed'")
    assert len({r["claimed_by"] for r in rows}) == 5


async def test_claims_per_moderator_are_bounded(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any]
) -> None:
    """With a bound of two, concurrent claims by one moderator stop at two; renewing is free."""
    review = db_settings.review.model_copy(update={"max_claims_per_user": 2})
    queue = ReviewQueue(pool, review)
    ids = [await seed(pool) for _ in range(5)]
    me = User(id=1, name="busy", role=Role.MODERATOR)
    results = await asyncio.gather(*(queue.claim(me, i) for i in ids), return_exceptions=True)
    ok = [r for r in results if not isinstance(r, BaseException)]
    assert len(ok) == 2
    assert sum(isinstance(r, ClaimLimitError) for r in results) == 3
    renewed = await queue.claim(me, ok[0].item_id)
    assert renewed.claim_expires_at >= ok[0].claim_expires_at


async def test_expired_claim_returns_item_to_queue(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """A claim past its expiry reads as open, can be taken by another, and blocks its old holder."""
    first = _auth(await _token(pool, "first"))
    second = _auth(await _token(pool, "second"))
    item_id = await seed(pool)
    claim = await client.post(f"/api/items/{item_id}/claim", headers=first)
    assert claim.status_code == 200
    expires = datetime.fromisoformat(claim.json()["claim_expires_at"])
    assert timedelta(seconds=590) < expires - datetime.now(UTC) <= timedelta(seconds=600)
    assert (await client.post(f"/api/items/{item_id}/claim", headers=second)).status_code == 409
    assert (await client.get("/api/queue", headers=second)).json() == []

    await pool.execute(
        "UPDATE review_items SET claim_expires_at = now() - interval '1 second' "
        "WHERE public_id = $1",
        item_id,
    )
    listing = (await client.get("/api/queue", headers=second)).json()
    assert [(i["id"], i["status"]) for i in listing] == [(item_id, "open")]
    taken = await client.post("/api/queue/claim-next", headers=second)
    assert taken.status_code == 200
    assert taken.json()["item_id"] == item_id

    late = await client.post(
        f"/api/items/{item_id}/decide", headers=first, json={"action": "ban", "reason": "late"}
    )
    assert late.status_code == 409
    assert late.json()["error"] == "claim_required"
    assert publisher.records == []


async def test_release_returns_item_and_is_audited(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Release puts a claimed item back; only the holder may release; both steps are audited."""
    mine = _auth(await _token(pool, "holder"))
    other = _auth(await _token(pool, "other"))
    item_id = await seed(pool)
    assert (await client.post("/api/queue/claim-next", headers=mine)).status_code == 200
    assert (await client.post(f"/api/items/{item_id}/release", headers=other)).status_code == 409
    assert (await client.post(f"/api/items/{item_id}/release", headers=mine)).status_code == 204
    assert [i["id"] for i in (await client.get("/api/queue", headers=other)).json()] == [item_id]
    events = (await client.get(f"/api/events?item_id={item_id}", headers=other)).json()
    assert [(e["actor"], e["action"]) for e in events] == [
        ("holder", "release"),
        ("holder", "claim"),
    ]
    assert (await client.post("/api/queue/claim-next", headers=other)).status_code == 200
    assert (await client.post("/api/queue/claim-next", headers=mine)).status_code == 204


async def test_an_item_a_rescan_closed_leaves_the_queue_and_cannot_be_claimed(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """A closed item (its verdict no longer escalated) is neither listed, counted nor claimable;
    the open one beside it still is."""
    headers = _auth(await _token(pool, "mod"))
    closed = await seed(pool)
    still_open = await seed(pool)
    await pool.execute(
        "UPDATE review_items SET status = 'closed', closed_at = now() WHERE public_id = $1",
        uuid.UUID(closed),
    )
    listed = (await client.get("/api/queue?include_claimed=true", headers=headers)).json()
    assert [i["id"] for i in listed] == [still_open]
    counts = (await client.get("/api/queue/counts", headers=headers)).json()
    assert sum(c["open"] + c["claimed"] for c in counts) == 1
    refused = await client.post(f"/api/items/{closed}/claim", headers=headers)
    assert refused.status_code == 409
    assert refused.json()["error"] == "item_resolved"
    taken = (await client.post("/api/queue/claim-next", headers=headers)).json()
    assert taken["item_id"] == still_open


async def test_decide_writes_audit_strike_and_publishes(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """A decision resolves the item, appends who/what/why, adds a strike and reaches Kafka."""
    headers = _auth(await _token(pool, "dana"))
    item_id = await seed(pool, sender_id="troll", group_id="room-7")
    unclaimed = await client.post(
        f"/api/items/{item_id}/decide", headers=headers, json={"action": "mute", "reason": "x"}
    )
    assert unclaimed.status_code == 409
    await client.post(f"/api/items/{item_id}/claim", headers=headers)
    empty = await client.post(
        f"/api/items/{item_id}/decide", headers=headers, json={"action": "mute", "reason": ""}
    )
    assert empty.status_code == 422
    response = await client.post(
        f"/api/items/{item_id}/decide",
        headers=headers,
        json={"action": "mute", "reason": "slur against a member"},
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["published"] is True

    item = await pool.fetchrow("SELECT * FROM review_items WHERE public_id = $1", item_id)
    assert (item["status"], item["resolution"], item["resolved_by"]) == ("resolved", "mute", "dana")
    event = await pool.fetchrow(
        "SELECT * FROM review_events WHERE review_item_id = $1 AND action = 'mute'", item["id"]
    )
    assert event["actor"] == "dana"
    assert event["reason"] == "slur against a member"
    assert json.loads(event["details"])["decision_id"] == result["decision_id"]

    assert len(publisher.records) == 1
    key, value = publisher.records[0]
    assert key == b"room-7"
    payload = json.loads(value)
    assert payload["decision_id"] == result["decision_id"]
    assert payload["action"] == "mute"
    assert payload["sender_id"] == "troll"
    assert payload["moderator"] == "dana"
    assert payload["source"] == {
        "topic": "chat.messages",
        "partition": 0,
        "offset": item["source_offset"],
    }

    strikes = (await client.get("/api/senders/troll/strikes", headers=headers)).json()
    assert strikes == {"sender_id": "troll", "strikes": 2}
    again = await client.post(
        f"/api/items/{item_id}/decide", headers=headers, json={"action": "ban", "reason": "again"}
    )
    assert again.status_code == 409
    assert len(publisher.records) == 1


async def test_decision_survives_kafka_outage_through_the_outbox(
    client: httpx.AsyncClient,
    pool: asyncpg.Pool[Any],
    publisher: MemoryPublisher,
    db_settings: ReviewServiceSettings,
) -> None:
    """With Kafka down the decision is stored unpublished; the relay sends it once it is back."""
    headers = _auth(await _token(pool, "erin"))
    item_id = await seed(pool)
    await client.post(f"/api/items/{item_id}/claim", headers=headers)
    publisher.failing = True
    response = await client.post(
        f"/api/items/{item_id}/decide", headers=headers, json={"action": "warn", "reason": "rude"}
    )
    assert response.status_code == 200
    assert response.json()["published"] is False
    pending = await pool.fetchrow("SELECT published_at, attempts FROM review_decision_outbox")
    assert pending["published_at"] is None
    assert pending["attempts"] >= 1

    from review.decisions import OutboxRelay

    publisher.failing = False
    assert await OutboxRelay(pool, publisher, db_settings.kafka.decision_topic).flush() == 1
    assert json.loads(publisher.records[0][1])["decision_id"] == response.json()["decision_id"]
    assert publisher.topics == [db_settings.kafka.decision_topic]
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM review_decision_outbox WHERE published_at IS NULL"
        )
        == 0
    )


async def test_escalate_to_admin_moves_item_to_admin_queue(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """Escalation publishes nothing, hides the item from moderators and lets an admin decide it."""
    mod = _auth(await _token(pool, "mod"))
    admin = _auth(await _token(pool, "root", Role.ADMIN))
    item_id = await seed(pool)
    await client.post(f"/api/items/{item_id}/claim", headers=mod)
    escalated = await client.post(
        f"/api/items/{item_id}/decide",
        headers=mod,
        json={"action": "escalate_to_admin", "reason": "threat, needs an admin"},
    )
    assert escalated.status_code == 200
    assert escalated.json()["decision_id"] is None
    assert publisher.records == []
    assert (await client.get("/api/queue", headers=mod)).json() == []
    admin_queue = (await client.get("/api/queue?queue=admin", headers=admin)).json()
    assert [i["id"] for i in admin_queue] == [item_id]
    await client.post(f"/api/items/{item_id}/claim", headers=admin)
    banned = await client.post(
        f"/api/items/{item_id}/decide", headers=admin, json={"action": "ban", "reason": "threat"}
    )
    assert banned.status_code == 200
    assert json.loads(publisher.records[0][1])["action"] == "ban"


async def test_item_context_has_verdict_group_and_sender_history(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """The context view joins the verdict (scores, rule hits, model version) and the history."""
    headers = _auth(await _token(pool, "mod"))
    earlier = await seed(pool, group_id="room", sender_id="x", text="first", age_s=60)
    await pool.execute(
        "UPDATE review_items SET status = 'resolved', resolution = 'warn' WHERE public_id = $1",
        earlier,
    )
    await pool.execute(
        "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, weight, "
        "expires_at) VALUES ('x', 'room', (SELECT id FROM review_items WHERE public_id = $1), "
        "'warn', 1, now() + interval '1 day')",
        earlier,
    )
    item_id = await seed(pool, group_id="room", sender_id="x", text="second")
    assert (await client.post(f"/api/items/{item_id}/claim", headers=headers)).status_code == 200
    ctx = (await client.get(f"/api/items/{item_id}", headers=headers)).json()
    assert ctx["item"]["id"] == item_id
    assert ctx["text_visible"] is True
    assert ctx["item"]["message_text"] == "second"
    assert ctx["verdict"]["model_version"] == "3"
    assert ctx["verdict"]["scores"]["toxicity"]["hate"] == pytest.approx(0.6)
    assert ctx["verdict"]["rule_hits"][0]["rule_id"] == "en.insult.1"
    assert [m["message_text"] for m in ctx["group_messages"]] == ["first"]
    assert len(ctx["group_verdicts"]) == 1
    assert [s["resolution"] for s in ctx["sender_items"]] == ["warn"]
    assert ctx["sender_verdict_counts"] == {"flag": 2}
    assert ctx["sender_strikes"] == 1
    assert ctx["strikes"][0]["review_item_id"] == earlier
    assert [e["action"] for e in ctx["events"]] == ["view_text", "claim"]
    assert (await client.get("/api/items/999999", headers=headers)).status_code == 404


async def test_openapi_document_is_served_to_signed_in_callers(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """The OpenAPI document lists the review routes and declares bearer auth."""
    doc = (await client.get("/api/openapi.json", headers=_auth(await _token(pool, "m")))).json()
    assert "/api/items/{item_id}/decide" in doc["paths"]
    assert "/api/queue/claim-next" in doc["paths"]
    assert "HTTPBearer" in doc["components"]["securitySchemes"]


async def test_active_strikes_for_the_worker(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any]
) -> None:
    """active_strikes sums live strikes per sender and reports 0 for unknown senders."""
    from common.strikes import active_strikes

    item_id = await pool.fetchval(
        "SELECT id FROM review_items WHERE public_id = $1", await seed(pool)
    )
    await pool.execute(
        "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, weight, "
        "expires_at) VALUES ('a', 'g', $1, 'ban', 3, now() + interval '1 day'), "
        "('a', 'h', $1, 'warn', 1, now() + interval '1 day'), "
        "('b', 'g', $1, 'warn', 1, now() - interval '1 day')",
        item_id,
    )
    assert await active_strikes(pool, ["a", "b", "c"]) == {"a": 4, "b": 0, "c": 0}
    assert ReviewSettings().strike_decay_days == 30


async def test_moderators_do_not_see_the_audit_of_admin_escalations(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Once an item is escalated to admins its audit trail is visible to admins only."""
    mod = _auth(await _token(pool, "mod"))
    admin = _auth(await _token(pool, "root", Role.ADMIN))
    item_id = await seed(pool)
    await client.post(f"/api/items/{item_id}/claim", headers=mod)
    await client.post(
        f"/api/items/{item_id}/decide",
        headers=mod,
        json={"action": "escalate_to_admin", "reason": "credible threat"},
    )
    assert (await client.get(f"/api/events?item_id={item_id}", headers=mod)).json() == []
    admin_view = (await client.get(f"/api/events?item_id={item_id}", headers=admin)).json()
    assert [e["action"] for e in admin_view] == ["escalate_to_admin", "claim"]


async def test_disabled_users_lose_token_and_sessions(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """disable_user revokes the API token and deletes the user's console sessions."""
    from review.auth import disable_user

    token = await _token(pool, "leaver")
    assert (await client.get("/api/me", headers=_auth(token))).status_code == 200
    assert (await client.post("/console/login", data={"token": token})).status_code == 303
    async with pool.acquire() as conn:
        assert await disable_user(conn, "leaver")
        assert not await disable_user(conn, "leaver")
    assert (await client.get("/api/me", headers=_auth(token))).status_code == 401
    assert await pool.fetchval("SELECT count(*) FROM review_sessions") == 0
    assert (await client.get("/console/queue")).status_code == 303


class _RefusingPublisher(MemoryPublisher):
    """Refuses, as Kafka does a record over its size limit, every decision naming "refuse-me"."""

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        if any(b"refuse-me" in value for _, value in records):
            raise PublishRefusedError("kafka refused the decision: MessageSizeTooLargeError")
        await super().publish(topic, records)


async def _decide(
    http: httpx.AsyncClient, headers: dict[str, str], item_id: str, reason: str
) -> Any:
    assert (await http.post(f"/api/items/{item_id}/claim", headers=headers)).status_code == 200
    response = await http.post(
        f"/api/items/{item_id}/decide", headers=headers, json={"action": "warn", "reason": reason}
    )
    assert response.status_code == 200
    return response.json()


def _metric(text: str, name: str) -> float:
    (line,) = [x for x in text.splitlines() if x.startswith(name + " ")]
    return float(line.split()[1])


async def test_one_refused_decision_is_set_aside_and_the_rest_flow(
    pool: asyncpg.Pool[Any], db_settings: ReviewServiceSettings
) -> None:
    """A decision Kafka refuses does not wedge later ones; after the attempt limit it is marked
    failed with the reason (kept for an admin) and /metrics shows the alert."""
    review = db_settings.review.model_copy(
        update={"publish_max_attempts": 3, "publish_retry_s": 3600.0}
    )
    settings = db_settings.model_copy(update={"review": review})
    publisher = _RefusingPublisher()
    app = create_app(settings, pool=pool, publisher=publisher)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://r.test") as http,
    ):
        headers = _auth(await _token(pool, "fred"))
        refused = await _decide(http, headers, await seed(pool), "refuse-me")
        later = [await _decide(http, headers, await seed(pool), f"ok {i}") for i in range(2)]
        assert refused["published"] is False
        assert [d["published"] for d in later] == [True, True]
        assert len(publisher.records) == 2
        relay = app.state.review.relay
        for _ in range(3):
            await relay.flush()
        row = await pool.fetchrow(
            "SELECT published_at, failed_at, failure_reason, attempts FROM review_decision_outbox "
            "WHERE decision_id = $1",
            refused["decision_id"],
        )
        assert row is not None
        assert row["published_at"] is None
        assert row["failed_at"] is not None
        assert row["attempts"] == 3
        assert "MessageSizeTooLargeError" in row["failure_reason"]
        metrics = (await http.get("/metrics")).text
        assert _metric(metrics, "modstream_review_decisions_failed_total") == 1.0
        assert _metric(metrics, "modstream_review_failed_decisions") == 1.0
        assert _metric(metrics, "modstream_review_oldest_unpublished_decision_age_seconds") == 0.0


async def test_metrics_show_the_age_of_the_oldest_unpublished_decision(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """While Kafka is away the oldest unpublished decision's age grows on /metrics."""
    publisher.failing = True
    await _decide(client, _auth(await _token(pool, "gina")), await seed(pool), "rude")
    await asyncio.sleep(1.1)
    metrics = (await client.get("/metrics")).text
    assert _metric(metrics, "modstream_review_oldest_unpublished_decision_age_seconds") >= 1.0
    assert _metric(metrics, "modstream_review_failed_decisions") == 0.0


def _labelled(text: str, name: str, **labels: str) -> float:
    """The value of the series ``name{labels}`` in an exposition (labels in any order)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"{name}{labels} not exported")


async def test_metrics_show_each_queues_depth_oldest_item_and_target(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Two open items and a claimed one in the moderators' queue, a decided one that no longer
    counts, an empty admins' queue: /metrics gives each queue's open and claimed counts, the age
    of its oldest unresolved item (the claimed one included) and its decision target."""
    headers = _auth(await _token(pool, "hana"))
    await seed(pool, age_s=30)
    await seed(pool, age_s=5)
    claimed = await seed(pool, age_s=300)
    decided = await seed(pool, age_s=5_000)
    await _decide(client, headers, decided, "handled")
    assert (await client.post(f"/api/items/{claimed}/claim", headers=headers)).status_code == 200
    metrics = (await client.get("/metrics")).text
    items = "modstream_review_queue_items"
    assert _labelled(metrics, items, queue="moderator", state="open") == 2
    assert _labelled(metrics, items, queue="moderator", state="claimed") == 1
    assert _labelled(metrics, items, queue="admin", state="open") == 0
    oldest = "modstream_review_queue_oldest_item_age_seconds"
    assert 300 <= _labelled(metrics, oldest, queue="moderator") < 1_000
    assert _labelled(metrics, oldest, queue="admin") == 0
    target = "modstream_review_queue_target_seconds"
    assert _labelled(metrics, target, queue="moderator") == 3_600
    assert _labelled(metrics, target, queue="admin") == 14_400


async def test_health_and_readiness_answer_for_the_probes(client: httpx.AsyncClient) -> None:
    """/healthz and /readyz (PostgreSQL answers) are 200 without a token: the probes' paths."""
    assert (await client.get("/healthz")).status_code == 200
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.text == "ready\n"


async def test_readiness_fails_while_postgresql_cannot_answer(
    db_settings: ReviewServiceSettings, publisher: MemoryPublisher
) -> None:
    """With its pool unusable (closed here, as after losing PostgreSQL), /readyz answers 503 and
    /healthz still 200: the pod leaves the Service's endpoints but is not restarted."""
    broken = await asyncpg.create_pool(db_settings.postgres.dsn.get_secret_value(), min_size=1)
    await broken.close()
    app = create_app(db_settings, pool=broken, publisher=publisher)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://r.test") as http,
    ):
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.text == "postgres unavailable\n"
        assert (await http.get("/healthz")).status_code == 200


async def test_the_confidence_counts_the_models_harms(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """A verdict from a model with HARMS: its highest harm is the item's confidence when above
    the toxicity and intent probabilities, and ranks the item above an equal-priority one."""
    headers = _auth(await _token(pool, "mod"))
    plain = await seed(pool, priority=0.5, sender_id="a", hate=0.6)
    harms = {"insult": 0.1, "threat": 0.93, "self_harm": 0.0}
    harms |= {"self_harm_incitement": 0.0, "sexual_solicitation": 0.2}
    threat = await seed(pool, priority=0.5, sender_id="b", hate=0.6, harms=harms)
    listing = (await client.get("/api/queue", headers=headers)).json()
    assert [i["id"] for i in listing] == [threat, plain]
    by_id = {i["id"]: i for i in listing}
    assert by_id[threat]["confidence"] == pytest.approx(0.93)
    assert by_id[plain]["confidence"] == pytest.approx(0.6)
