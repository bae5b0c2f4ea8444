"""Appeals against the real PostgreSQL and Kafka: filed over the topic and over the API, handled
in the appeals queue by a second moderator, the correction on moderation.decisions, the strike
lifted, the analysts' views. The review service connects as a login of ``modstream_review``,
so the grants of migration 0092 are what these tests exercise."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pydantic import SecretStr

from review.api import create_app
from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from tests.integration.conftest import wait_until
from tests.support import temporary_database

pytestmark = pytest.mark.integration


def _dsn_as(dsn: str, user: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


@pytest.fixture(scope="module")
async def databases() -> AsyncIterator[tuple[ReviewServiceSettings, str]]:
    """Settings of a fresh database reached as a ``modstream_review`` login, and the DSN of the
    database's owner (to seed verdicts as the worker would and to read the analysts' views)."""
    base = ReviewServiceSettings()
    login = f"mstest_{secrets.token_hex(4)}_appeals"
    async with temporary_database(base, prefix="modstream_test_appeals") as scoped:
        admin_dsn = scoped.postgres.dsn.get_secret_value()
        await _execute(admin_dsn, f'CREATE ROLE "{login}" LOGIN IN ROLE modstream_review')
        try:
            postgres = scoped.postgres.model_copy(
                update={"dsn": SecretStr(_dsn_as(admin_dsn, login))}
            )
            yield scoped.model_copy(update={"postgres": postgres}), admin_dsn
        finally:
            await _execute(base.postgres.dsn.get_secret_value(), f'DROP ROLE IF EXISTS "{login}"')


async def _execute(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
async def owner(databases: tuple[ReviewServiceSettings, str]) -> AsyncIterator[asyncpg.Pool[Any]]:
    pool = await asyncpg.create_pool(databases[1], min_size=1, max_size=4)
    await pool.execute(
        "TRUNCATE appeals, review_decision_outbox, sender_strikes, review_events, review_items, "
        "review_sessions, review_users, verdicts, dead_letters RESTART IDENTITY CASCADE"
    )
    yield pool
    await pool.close()


@pytest.fixture
async def settings(
    databases: tuple[ReviewServiceSettings, str],
) -> AsyncIterator[ReviewServiceSettings]:
    """The review service on this test's own appeal, DLQ and decision topics."""
    base = databases[0]
    suffix = uuid.uuid4().hex[:8]
    topics = {
        "appeal_topic": f"it.{suffix}.moderation.appeals",
        "appeal_dlq_topic": f"it.{suffix}.moderation.appeals.dlq",
        "decision_topic": f"it.{suffix}.moderation.decisions",
    }
    admin = AIOKafkaAdminClient(bootstrap_servers=base.kafka.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1) for name in topics.values()])
        review = base.review.model_copy(
            update={"appeals_group_id": f"it-appeals-{suffix}", "appeals_retry_s": 0.2}
        )
        yield base.model_copy(
            update={"kafka": base.kafka.model_copy(update=topics), "review": review}
        )
        await admin.delete_topics(list(topics.values()))
    finally:
        await admin.close()


@pytest.fixture
async def client(
    settings: ReviewServiceSettings,
) -> AsyncIterator[httpx.AsyncClient]:
    """The review app as ``modstream review serve`` runs it: its own pool (the review login),
    the real decision publisher and the reader of the appeals topic."""
    pool = await asyncpg.create_pool(
        settings.postgres.dsn.get_secret_value(), min_size=1, max_size=8
    )
    app = create_app(settings, pool=pool, consume_appeals_topic=True)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://review.test"
            ) as http,
        ):
            yield http
    finally:
        await pool.close()


async def _token(owner: asyncpg.Pool[Any], name: str, role: Role) -> dict[str, str]:
    async with owner.acquire() as conn:
        token = await create_user(conn, name, role)
    return {"Authorization": f"Bearer {token}"}


_offset = 0


async def _verdict(
    owner: asyncpg.Pool[Any],
    *,
    decision: str = "flag",
    escalate: bool = True,
    sender_id: str = "s1",
    category: str = "offensive",
) -> tuple[int, str | None]:
    """One verdict as the worker stores it (and its escalation); its offset and item id."""
    global _offset
    _offset += 1
    sent_at = datetime.now(UTC) - timedelta(minutes=5)
    await owner.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, category, priority, "
        "reasons, rule_hits, scores, model_name, model_version) VALUES "
        "('chat.messages', 0, $1, $2, $3, 'g1', $4, repeat('0', 64), $5, 'rules', $6, $7, 0.5, "
        "'{rule:en.insult}', $8::jsonb, NULL, NULL, NULL)",
        _offset,
        sent_at,
        f"m{_offset}",
        sender_id,
        decision,
        escalate,
        category,
        json.dumps(
            [{"rule_id": "en.insult", "category": category, "severity": "medium", "action": "flag"}]
        ),
    )
    if not escalate:
        return _offset, None
    item_id: str = await owner.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision, "
        "reasons) VALUES ('chat.messages', 0, $1, $2, $3, 'g1', $4, 'you absolute clown', $5, "
        "0.5, $6, '{rule:en.insult}') RETURNING public_id::text",
        _offset,
        sent_at,
        f"m{_offset}",
        sender_id,
        category,
        decision,
    )
    return _offset, item_id


async def _decide(
    client: httpx.AsyncClient, who: dict[str, str], item_id: str, action: str
) -> dict[str, Any]:
    assert (await client.post(f"/api/items/{item_id}/claim", headers=who)).status_code == 200
    response = await client.post(
        f"/api/items/{item_id}/decide", headers=who, json={"action": action, "reason": "abuse"}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _strikes(client: httpx.AsyncClient, who: dict[str, str], sender: str) -> int:
    response = await client.get(f"/api/senders/{sender}/strikes", headers=who)
    return int(response.json()["strikes"])


async def _produce(settings: ReviewServiceSettings, *values: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(settings.kafka.appeal_topic, value, key=b"k")
    finally:
        await producer.stop()


async def _records(topic: str, bootstrap: str, count: int) -> list[Any]:
    """The first ``count`` records of ``topic`` (waits up to 30 s for them)."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    found: list[Any] = []
    try:
        async with asyncio.timeout(30):
            while len(found) < count:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    found.extend(records)
    finally:
        await consumer.stop()
    return found


async def _appeal_item(owner: asyncpg.Pool[Any], appeal_key: str) -> str | None:
    value: str | None = await owner.fetchval(
        "SELECT i.public_id::text FROM appeals a JOIN review_items i ON i.id = a.review_item_id "
        "WHERE a.appeal_key = $1",
        appeal_key,
    )
    return value


async def test_an_appeal_on_the_topic_is_reversed_by_a_second_moderator(
    client: httpx.AsyncClient, owner: asyncpg.Pool[Any], settings: ReviewServiceSettings
) -> None:
    """alice mutes s1 (2 strikes); the platform appeals on moderation.appeals; alice may neither
    claim nor decide it; bob reverses it: the strikes are lifted, the correction naming alice's
    decision is on moderation.decisions, and the analysts' views count it against alice."""
    alice = await _token(owner, "alice", Role.MODERATOR)
    bob = await _token(owner, "bob", Role.MODERATOR)
    _, item_id = await _verdict(owner)
    assert item_id is not None
    decision = await _decide(client, alice, item_id, "mute")
    assert await _strikes(client, alice, "s1") == 2

    await _produce(
        settings,
        orjson.dumps(
            {
                "appeal_id": "p-appeal-1",
                "decision_id": decision["decision_id"],
                "appellant_id": "s1",
                "statement": "I was quoting the person who insulted me.",
            }
        ),
    )

    async def filed() -> bool:
        return await _appeal_item(owner, "p-appeal-1") is not None

    await wait_until(filed, 60)
    appeal_item = await _appeal_item(owner, "p-appeal-1")
    assert appeal_item is not None

    # alice decided it: the appeal is not hers to claim, list or decide.
    refused = await client.post(f"/api/items/{appeal_item}/claim", headers=alice)
    assert refused.status_code == 403
    assert refused.json()["error"] == "own_decision"
    listed = await client.get("/api/queue", headers=alice, params={"queue": "appeals"})
    assert listed.json() == []
    assert (
        await client.post("/api/queue/claim-next", headers=alice, params={"queue": "appeals"})
    ).status_code == 204
    outcome = {"outcome": "reversed", "reason": "quoted abuse"}
    tried = await client.post(
        f"/api/items/{appeal_item}/appeal-outcome", headers=alice, json=outcome
    )
    assert tried.status_code == 403

    claim = await client.post("/api/queue/claim-next", headers=bob, params={"queue": "appeals"})
    assert claim.status_code == 200
    assert claim.json()["item_id"] == appeal_item
    context = (await client.get(f"/api/items/{appeal_item}", headers=bob)).json()
    evidence = context["appeal"]
    assert evidence["statement"] == "I was quoting the person who insulted me."
    assert evidence["original_reason"] == "abuse"
    assert evidence["appeal"]["original_moderator"] == "alice"
    assert evidence["appeal"]["original_decision"] == "mute"
    assert context["verdict"]["rule_hits"][0]["rule_id"] == "en.insult"
    assert context["item"]["message_text"] == "you absolute clown"

    decided = await client.post(
        f"/api/items/{appeal_item}/appeal-outcome", headers=bob, json=outcome
    )
    assert decided.status_code == 200, decided.text
    result = decided.json()
    assert result["outcome"] == "reversed"
    assert result["strikes_lifted"] == 2
    assert result["published"] is True
    assert await _strikes(client, bob, "s1") == 0

    records = await _records(settings.kafka.decision_topic, settings.kafka.bootstrap_servers, 2)
    correction = orjson.loads(records[1].value)
    assert correction["decision_id"] == result["correction_id"]
    assert orjson.loads(records[0].value)["tenant"] == correction["tenant"] == "default"
    assert correction["type"] == "appeal_outcome"
    assert correction["correction"] is True
    assert correction["action"] == "appeal_reversed"
    assert correction["corrects"]["decision_id"] == decision["decision_id"]
    assert correction["corrects"]["moderator"] == "alice"
    assert correction["strike_weight_lifted"] == 2
    assert "statement" not in correction
    assert "message_text" not in correction

    events = [e["action"] for e in (await client.get("/api/events", headers=bob)).json()]
    assert {"appeal_filed", "appealed", "reversed", "appeal_reversed"} <= set(events)
    rates = await owner.fetchrow(
        "SELECT * FROM analytics_appeal_rates_by_moderator WHERE moderator = 'alice'"
    )
    assert rates is not None
    assert (rates["decisions"], rates["appeals"], rates["reversed"]) == (1, 1, 1)
    assert rates["reversal_rate"] == 1.0
    by_category = await owner.fetchrow(
        "SELECT * FROM analytics_appeal_rates WHERE category = 'offensive'"
    )
    assert by_category is not None
    assert (by_category["moderator_appeals"], by_category["reversed"]) == (1, 1)
    assert by_category["moderator_appeal_rate"] == 1.0
    # The database itself refuses alice as the decider of her own decision's appeal.
    with pytest.raises(asyncpg.CheckViolationError):
        await owner.execute(
            "UPDATE appeals SET decided_by = 'alice' WHERE appeal_key = 'p-appeal-1'"
        )


async def test_an_appeal_over_the_api_is_upheld_and_refusals_are_typed(
    client: httpx.AsyncClient, owner: asyncpg.Pool[Any], settings: ReviewServiceSettings
) -> None:
    """A rules block no person decided, appealed over the API: a replay answers the same
    appeal, a second appeal id is refused, a long statement and an allow verdict are refused
    with their codes, moderators cannot file; bob upholds it and the correction says so."""
    platform = await _token(owner, "chat-server", Role.PLATFORM)
    bob = await _token(owner, "bob", Role.MODERATOR)
    offset, _ = await _verdict(owner, decision="block", escalate=False, sender_id="s2")
    allowed, _ = await _verdict(owner, decision="allow", escalate=False, sender_id="s2")
    body = {
        "appeal_id": "api-1",
        "source": {"topic": "chat.messages", "partition": 0, "offset": offset},
        "appellant_id": "s2",
        "statement": "It was a joke between friends.",
    }
    first = await client.post("/api/appeals", headers=platform, json=body)
    assert first.status_code == 201, first.text
    filed = first.json()
    assert filed["created"] is True
    again = await client.post("/api/appeals", headers=platform, json=body)
    assert again.status_code == 200
    assert again.json()["appeal_id"] == filed["appeal_id"]
    assert again.json()["created"] is False
    other = await client.post("/api/appeals", headers=platform, json={**body, "appeal_id": "api-2"})
    assert other.status_code == 409
    assert other.json()["error"] == "already_appealed"
    assert other.json()["appeal_id"] == filed["appeal_id"]
    long = {**body, "appeal_id": "api-3", "statement": "x" * 2_001}
    too_long = await client.post("/api/appeals", headers=platform, json=long)
    assert too_long.status_code == 422
    assert too_long.json()["error"] == "statement_too_long"
    allow = {**body, "appeal_id": "api-4", "source": {**body["source"], "offset": allowed}}
    nothing = await client.post("/api/appeals", headers=platform, json=allow)
    assert nothing.status_code == 409
    assert nothing.json()["error"] == "not_appealable"
    assert (await client.post("/api/appeals", headers=bob, json=body)).status_code == 403
    assert (await client.get("/api/queue", headers=platform)).status_code == 401
    assert await owner.fetchval("SELECT count(*) FROM appeals") == 1

    metrics = (await client.get("/metrics")).text
    assert 'modstream_review_queue_items{queue="appeals",state="open"} 1.0' in metrics
    assert 'modstream_review_appeals_filed_total{channel="api"} 1.0' in metrics
    assert (
        'modstream_review_appeals_refused_total{channel="api",reason="already_appealed"} 1.0'
        in metrics
    )
    assert 'modstream_review_queue_overdue_items{queue="appeals"} 0.0' in metrics

    item = filed["item_id"]
    assert (await client.post(f"/api/items/{item}/claim", headers=bob)).status_code == 200
    wrong = await client.post(
        f"/api/items/{item}/decide", headers=bob, json={"action": "approve", "reason": "x"}
    )
    assert wrong.status_code == 422
    decided = await client.post(
        f"/api/items/{item}/appeal-outcome",
        headers=bob,
        json={"outcome": "upheld", "reason": "a threat is not a joke"},
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["strikes_lifted"] == 0
    view = (await client.get(f"/api/appeals/{filed['appeal_id']}", headers=platform)).json()
    assert view["status"] == "upheld"
    assert view["original_decided_by"] == "rules"
    assert view["original_decision"] == "block"
    records = await _records(settings.kafka.decision_topic, settings.kafka.bootstrap_servers, 1)
    correction = orjson.loads(records[0].value)
    assert correction["action"] == "appeal_upheld"
    assert correction["corrects"]["decision_id"] is None
    assert correction["corrects"]["source"] == body["source"]
    metrics = (await client.get("/metrics")).text
    assert (
        'modstream_review_appeals_decided_total{category="offensive",outcome="upheld"} 1.0'
        in metrics
    )
    row = await owner.fetchrow("SELECT * FROM analytics_appeals")
    assert row is not None
    assert (row["status"], row["original_decided_by"], row["overdue"]) == ("upheld", "rules", False)


async def test_the_same_moderator_is_refused_over_the_api(
    client: httpx.AsyncClient, owner: asyncpg.Pool[Any]
) -> None:
    """An appeal filed over the API against carol's ban: carol is refused it (claim and outcome)
    even as an admin; dave reverses it and the three strikes are lifted."""
    platform = await _token(owner, "chat-server", Role.PLATFORM)
    carol = await _token(owner, "carol", Role.ADMIN)
    dave = await _token(owner, "dave", Role.MODERATOR)
    _, item_id = await _verdict(owner, sender_id="s3")
    assert item_id is not None
    decision = await _decide(client, carol, item_id, "ban")
    assert await _strikes(client, dave, "s3") == 3
    filed = await client.post(
        "/api/appeals",
        headers=platform,
        json={
            "appeal_id": "api-own",
            "decision_id": decision["decision_id"],
            "appellant_id": "s3",
            "statement": "Please look again.",
        },
    )
    assert filed.status_code == 201, filed.text
    item = filed.json()["item_id"]
    refused = await client.post(f"/api/items/{item}/claim", headers=carol)
    assert refused.status_code == 403
    assert refused.json()["error"] == "own_decision"
    outcome = {"outcome": "reversed", "reason": "context shows banter"}
    refused = await client.post(f"/api/items/{item}/appeal-outcome", headers=carol, json=outcome)
    assert refused.status_code == 403
    assert await owner.fetchval("SELECT status FROM appeals") == "open"
    assert (await client.post(f"/api/items/{item}/claim", headers=dave)).status_code == 200
    decided = await client.post(f"/api/items/{item}/appeal-outcome", headers=dave, json=outcome)
    assert decided.status_code == 200, decided.text
    assert decided.json()["strikes_lifted"] == 3
    assert await _strikes(client, dave, "s3") == 0


async def test_bad_appeal_records_are_dead_lettered_and_nothing_is_lost(
    client: httpx.AsyncClient, owner: asyncpg.Pool[Any], settings: ReviewServiceSettings
) -> None:
    """Not JSON, a statement over the limit and an unknown decision go to the appeals DLQ with
    their reason (never the statement) and to dead_letters; the good record after them is filed."""
    _, item_id = await _verdict(owner, sender_id="s4")
    erin = await _token(owner, "erin", Role.MODERATOR)
    assert item_id is not None
    decision = await _decide(client, erin, item_id, "warn")
    secret = "my private words " * 200
    good = {
        "appeal_id": "k-good",
        "decision_id": decision["decision_id"],
        "appellant_id": "s4",
        "statement": "fine",
    }
    await _produce(
        settings,
        b"{not json",
        orjson.dumps({**good, "appeal_id": "k-long", "statement": secret}),
        orjson.dumps({**good, "appeal_id": "k-none", "decision_id": str(uuid.uuid4())}),
        orjson.dumps(good),
    )

    async def filed() -> bool:
        return await _appeal_item(owner, "k-good") is not None

    await wait_until(filed, 60)
    dlq = await _records(settings.kafka.appeal_dlq_topic, settings.kafka.bootstrap_servers, 3)
    codes = [dict(r.headers)["reason_code"].decode() for r in dlq]
    assert codes == ["invalid_appeal", "statement_too_long", "appeal_target_not_found"]
    assert dlq[0].value == b"{not json"
    for record in dlq:
        assert b"private" not in dict(record.headers)["reason"]
    rows = await owner.fetch("SELECT reason_code, reason FROM dead_letters ORDER BY source_offset")
    assert [r["reason_code"] for r in rows] == codes
    assert all("private" not in r["reason"] for r in rows)
    assert await owner.fetchval("SELECT count(*) FROM appeals") == 1
