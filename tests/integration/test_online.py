"""The online service against the real stack: stored, published, idempotent, bounded in time."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import grpc
import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from grpc_health.v1 import health_pb2

from pipelines.scores import HARM_LABELS
from review.schemas import Role
from tests.integration.conftest import wait_until
from tests.integration.online_support import (
    Client,
    make_token,
    online_settings_for,
    request,
    running_service,
)
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

CALM = "good morning everyone"
SPAM = "FREE MONEY!!! click http://win-prizes.example.com now to claim your reward"
THREAT = "I will kill you if I see you again"


async def _verdict_rows(dsn: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT source_topic, source_partition, source_offset, message_id, decision, "
            "decided_by, escalated, published FROM verdicts WHERE source_topic = 'online' "
            "ORDER BY source_offset"
        )
    finally:
        await conn.close()
    return [dict(r) for r in rows]


async def _published(bootstrap: str, topic: str, expected: int) -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while len(out) < expected and asyncio.get_running_loop().time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(orjson.loads(r.value) for r in records)
    finally:
        await consumer.stop()
    return out


async def _clear(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "DELETE FROM review_items WHERE source_topic = 'online';"
            "DELETE FROM pending_texts WHERE source_topic = 'online';"
            "DELETE FROM verdicts WHERE source_topic = 'online';"
            "DELETE FROM online_messages"
        )
    finally:
        await conn.close()


async def test_verdicts_are_stored_as_online_escalated_and_published(
    stack_settings: WorkerSettings, database: str, topics: dict[str, str]
) -> None:
    """Model, rule and escalated verdicts are stored at online coordinates and published."""
    await _clear(database)
    settings = online_settings_for(database, topics)
    token = await make_token(database)
    async with running_service(settings) as service:
        assert service.port is not None
        client = Client(service.port, token)
        try:
            calm = await client.check(request(CALM))
            spam = await client.check(request(SPAM))
            threat = await client.check(request(THREAT))
        finally:
            await client.close()
    assert (calm.decision, calm.decided_by) == ("allow", "model")
    assert calm.model_name == "moderation"
    assert calm.model_version
    # the fixture's default version 2 answers HARMS: independent probabilities, no label
    assert set(calm.scores) == {"sentiment", "intent", "toxicity", "harms"}
    assert set(calm.scores["harms"].probabilities) == set(HARM_LABELS)
    assert calm.scores["harms"].label == ""
    assert calm.latency.total_ms >= calm.latency.inference_ms > 0
    assert (spam.decision, spam.decided_by) == ("block", "rules")
    assert spam.rule_hits
    assert spam.rule_hits[0].category == "spam"
    assert spam.latency.inference_ms == 0
    assert not spam.scores
    assert threat.escalate
    rows = await _verdict_rows(database)
    assert [(r["source_topic"], r["source_partition"]) for r in rows] == [("online", 0)] * 3
    assert {r["source_offset"] for r in rows} == {
        calm.source_offset,
        spam.source_offset,
        threat.source_offset,
    }
    assert all(r["published"] for r in rows)
    conn = await asyncpg.connect(database)
    try:
        escalated = await conn.fetchval(
            "SELECT count(*) FROM review_items "
            "WHERE source_topic = 'online' AND source_offset = $1",
            threat.source_offset,
        )
    finally:
        await conn.close()
    assert escalated == 1
    records = await _published(stack_settings.kafka.bootstrap_servers, topics["verdict_topic"], 3)
    assert {(r["source_topic"], r["message_id"]) for r in records} == {
        ("online", calm.message_id),
        ("online", spam.message_id),
        ("online", threat.message_id),
    }
    assert all("text" not in r for r in records)
    # Where the rules matched: code-point offsets into the request's text, answered and
    # published alike.
    answered = [[[s.start, s.end] for s in hit.spans] for hit in spam.rule_hits]
    assert any(answered)
    assert all(0 <= a < b <= len(SPAM) for spans in answered for a, b in spans)
    (spam_record,) = [r for r in records if r["message_id"] == spam.message_id]
    assert [hit.get("spans", []) for hit in spam_record["rule_hits"]] == answered


async def test_repeats_return_the_stored_verdict_also_when_concurrent(
    database: str, topics: dict[str, str]
) -> None:
    """Concurrent and later calls with one message_id share one stored row and one answer."""
    await _clear(database)
    settings = online_settings_for(database, topics)
    token = await make_token(database)
    async with running_service(settings) as service:
        assert service.port is not None
        client = Client(service.port, token)
        try:
            req = request(CALM, message_id="repeat-1")
            answers = await asyncio.gather(*(client.check(req) for _ in range(8)))
            later = await client.check(request("something else entirely", message_id="repeat-1"))
            batch = await client.check_many([req, request(SPAM)])
        finally:
            await client.close()
    first = answers[0]
    assert {a.source_offset for a in [*answers, later, batch.results[0]]} == {first.source_offset}
    assert {(a.decision, a.decided_by) for a in [*answers, later]} == {
        (first.decision, first.decided_by)
    }
    assert sum(not a.replayed for a in answers) == 1
    assert later.replayed
    assert batch.results[0].replayed
    assert not batch.results[1].replayed
    assert batch.results[1].decided_by == "rules"
    rows = await _verdict_rows(database)
    assert [r["message_id"] for r in rows].count("repeat-1") == 1


async def test_model_timeout_answers_pending_model_and_the_rescorer_finishes_it(
    database: str, topics: dict[str, str]
) -> None:
    """Past the model budget the rules-only verdict is returned, kept, and later re-scored."""
    await _clear(database)
    settings = online_settings_for(database, topics, model_budget_ms=1.0, min_model_ms=0.0)
    token = await make_token(database)
    async with running_service(settings) as service:
        assert service.port is not None
        client = Client(service.port, token)
        try:
            answer = await client.check(request(CALM))
        finally:
            await client.close()
        assert answer.decided_by == "pending_model"
        assert answer.decision == "allow"
        assert not answer.model_name

        async def rescored() -> bool:
            rows = await _verdict_rows(database)
            return [r["decided_by"] for r in rows] == ["model"]

        # The service's own re-scorer (no model budget) decides the row in place.
        await wait_until(rescored, 30)
    conn = await asyncpg.connect(database)
    try:
        left = await conn.fetchval(
            "SELECT count(*) FROM pending_texts WHERE source_topic = 'online'"
        )
    finally:
        await conn.close()
    assert left == 0


async def test_a_full_queue_refuses_with_resource_exhausted(
    database: str, topics: dict[str, str]
) -> None:
    """With a queue of one, a burst gets answers for some calls and RESOURCE_EXHAUSTED for the
    rest, at once."""
    await _clear(database)
    settings = online_settings_for(database, topics, queue_limit=1)
    token = await make_token(database)
    async with running_service(settings) as service:
        assert service.port is not None
        client = Client(service.port, token)
        try:
            outcomes = await asyncio.gather(
                *(client.check(request(CALM)) for _ in range(20)), return_exceptions=True
            )
        finally:
            await client.close()
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    answered = [o for o in outcomes if not isinstance(o, BaseException)]
    assert answered
    assert refused
    assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert len(await _verdict_rows(database)) == len(answered)


async def test_bad_input_and_missing_tokens_are_refused_with_their_codes(
    database: str, topics: dict[str, str]
) -> None:
    """Bad messages get INVALID_ARGUMENT with the decoder's code; calls without a platform token
    get UNAUTHENTICATED; health answers SERVING with the model and PostgreSQL up."""
    await _clear(database)
    settings = online_settings_for(database, topics)
    token = await make_token(database)
    moderator_token = await make_token(database, Role.MODERATOR)
    async with running_service(settings) as service:
        assert service.port is not None
        client = Client(service.port, token)
        anonymous = Client(service.port, None)
        moderator = Client(service.port, moderator_token)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as empty:
                await client.check(request("  \u200b "))
            with pytest.raises(grpc.aio.AioRpcError) as undated:
                await client.check(request(CALM, sent_at=None))
            with pytest.raises(grpc.aio.AioRpcError) as no_token:
                await anonymous.check(request(CALM))
            with pytest.raises(grpc.aio.AioRpcError) as wrong_role:
                await moderator.check(request(CALM))
            check = client.channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )

            async def serving() -> bool:
                reply = await check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

            await wait_until(serving, 20)
        finally:
            for c in (client, anonymous, moderator):
                await c.close()
    assert empty.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (empty.value.details() or "").startswith("empty_text")
    assert undated.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (undated.value.details() or "").startswith("missing_field")
    assert no_token.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert wrong_role.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert await _verdict_rows(database) == []


async def test_two_instances_answer_concurrent_repeats_with_one_stored_verdict(
    database: str, topics: dict[str, str]
) -> None:
    """Repeats spread over two services at once: one row, one offset, one decision for all."""
    await _clear(database)
    settings = online_settings_for(database, topics)
    token = await make_token(database)
    async with running_service(settings) as one, running_service(settings) as two:
        assert one.port is not None
        assert two.port is not None
        clients = [Client(one.port, token), Client(two.port, token)]
        try:
            req = request(CALM, message_id="across-1")
            answers = await asyncio.gather(*(clients[i % 2].check(req) for i in range(10)))
        finally:
            for client in clients:
                await client.close()
    assert len({a.source_offset for a in answers}) == 1
    assert len({(a.decision, a.decided_by) for a in answers}) == 1
    assert [r["message_id"] for r in await _verdict_rows(database)] == ["across-1"]
