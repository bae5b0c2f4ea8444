"""``POST /v1alpha1/comments:analyze`` against the real stack (Kafka, PostgreSQL, Triton's
fixture model): scores, stored verdicts, ``doNotStore``, and Perspective's error shapes."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from review.auth import create_user
from review.schemas import Role
from tests.integration.online_support import make_token, running_service
from tests.integration.perspective_support import count_rows, perspective_settings
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

ATTRIBUTES = (
    "TOXICITY",
    "SEVERE_TOXICITY",
    "IDENTITY_ATTACK",
    "INSULT",
    "PROFANITY",
    "THREAT",
    "SEXUALLY_EXPLICIT",
)
CALM = "thanks for the help with the ticket, see you tomorrow"
THREAT = "I will kill you if I see you again"
PATH = "/v1alpha1/comments:analyze"


def _body(text: str, *attributes: str, **fields: Any) -> dict[str, Any]:
    return {
        "comment": {"text": text},
        "requestedAttributes": {a: {} for a in attributes or ATTRIBUTES},
        **fields,
    }


async def test_scores_every_attribute_and_stores_the_call_as_a_verdict(
    stack_settings: WorkerSettings, database: str, topics: dict[str, str]
) -> None:
    """A stored call answers all seven attributes as probabilities with whole-text spans, and
    leaves one online verdict row; a threat is escalated and located by its rule's span."""
    settings = perspective_settings(database, topics)
    token = await make_token(database)
    before = await count_rows(database)
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.perspective_port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            calm = await http.post(PATH, params={"key": token}, json=_body(CALM, clientToken="c1"))
            threat = await http.post(
                PATH, params={"key": token}, json=_body(THREAT, spanAnnotations=True)
            )
            zh = await http.post(PATH, params={"key": token}, json=_body("我迟早弄死你", "THREAT"))
    assert calm.status_code == 200, calm.text
    answer = calm.json()
    assert set(answer["attributeScores"]) == set(ATTRIBUTES)
    for name in ATTRIBUTES:
        summary = answer["attributeScores"][name]["summaryScore"]
        assert summary["type"] == "PROBABILITY"
        assert 0.0 <= summary["value"] < 0.5, name
        (span,) = answer["attributeScores"][name]["spanScores"]
        assert (span["begin"], span["end"]) == (0, len(CALM))
    assert answer["languages"] == ["en"]
    assert answer["detectedLanguages"] == ["en"]
    assert answer["clientToken"] == "c1"
    assert threat.status_code == 200, threat.text
    scored = threat.json()["attributeScores"]
    assert scored["THREAT"]["summaryScore"]["value"] >= 0.9
    assert scored["TOXICITY"]["summaryScore"]["value"] >= 0.9
    spans = scored["THREAT"]["spanScores"]
    assert all(0 <= s["begin"] < s["end"] <= len(THREAT) for s in spans)
    assert any(s["end"] - s["begin"] < len(THREAT) for s in spans)  # the rule's words
    assert zh.status_code == 200, zh.text
    assert zh.json()["detectedLanguages"] == ["zh"]
    assert zh.json()["attributeScores"]["THREAT"]["summaryScore"]["value"] >= 0.9
    after = await count_rows(database)
    assert after["verdicts"] - before["verdicts"] == 3
    assert after["online_messages"] - before["online_messages"] == 3
    assert after["review_items"] - before["review_items"] >= 2  # both threats go to a person
    conn = await asyncpg.connect(database)
    try:
        groups = await conn.fetch(
            "SELECT group_id, sender_id FROM verdicts WHERE source_topic = 'online' "
            "AND message_id LIKE 'perspective-%'"
        )
    finally:
        await conn.close()
    assert {(r["group_id"], r["sender_id"]) for r in groups} == {("perspective", "perspective")}


async def test_do_not_store_stores_nothing_and_still_scores(
    database: str, topics: dict[str, str]
) -> None:
    """``doNotStore: true``: the same scores, and no verdict, claim, review item or pending
    text is stored (a stored call of the same text in between proves the counter moves)."""
    settings = perspective_settings(database, topics)
    token = await make_token(database)
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.perspective_port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            before = await count_rows(database)
            unstored = await http.post(
                PATH, params={"key": token}, json=_body(THREAT, doNotStore=True)
            )
            await asyncio.sleep(0.5)  # longer than a publish and a write would take
            middle = await count_rows(database)
            stored = await http.post(PATH, params={"key": token}, json=_body(THREAT))
            after = await count_rows(database)
    assert unstored.status_code == stored.status_code == 200, unstored.text
    assert middle == before
    assert after["verdicts"] == before["verdicts"] + 1
    left, right = unstored.json()["attributeScores"], stored.json()["attributeScores"]
    for name in ATTRIBUTES:
        assert left[name]["summaryScore"]["value"] == pytest.approx(
            right[name]["summaryScore"]["value"], abs=1e-4
        ), name


async def test_refusals_have_perspectives_error_shape(
    database: str, topics: dict[str, str]
) -> None:
    """Missing and bad keys, an unsupported language or attribute, bad JSON, an oversize
    body, and a spent quota: each its status and Google's ``{"error": {...}}``, naming what
    is wrong and never quoting the comment."""
    settings = perspective_settings(database, topics, qps=1.0, burst=5.0, max_body_bytes=2048)
    token = await make_token(database)
    secret = "a comment nobody may read in an error"
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.perspective_port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            missing = await http.post(PATH, json=_body(secret))
            bad = await http.post(PATH, params={"key": "not-a-token"}, json=_body(secret))
            french = await http.post(
                PATH, params={"key": token}, json=_body(secret, languages=["fr"])
            )
            russian = await http.post(PATH, params={"key": token}, json=_body("ты дурак"))
            unknown = await http.post(
                PATH, params={"key": token}, json=_body(secret, "TOXICITY", "FLIRTATION")
            )
            broken = await http.post(
                PATH, params={"key": token}, content=b"{not json", headers={"x": "y"}
            )
            large = await http.post(PATH, params={"key": token}, json=_body("a" * 4000))
            quota = [
                await http.post(PATH, params={"key": token}, json=_body(CALM, "TOXICITY"))
                for _ in range(8)
            ]
            metrics = (await http.get(f"http://127.0.0.1:{service.http_port}/metrics")).text
    expected = [
        (missing, 403, "PERMISSION_DENIED"),
        (bad, 401, "UNAUTHENTICATED"),
        (french, 400, "INVALID_ARGUMENT"),
        (russian, 400, "INVALID_ARGUMENT"),
        (unknown, 400, "INVALID_ARGUMENT"),
        (broken, 400, "INVALID_ARGUMENT"),
        (large, 413, "INVALID_ARGUMENT"),
    ]
    for response, code, status in expected:
        error = response.json()["error"]
        assert (response.status_code, error["code"], error["status"]) == (code, code, status)
        assert secret not in response.text
    assert "does not support request languages: fr" in french.json()["error"]["message"]
    assert "ru" in russian.json()["error"]["message"]
    assert french.json()["error"]["details"][0]["errorType"] == (
        "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"
    )
    assert "FLIRTATION" in unknown.json()["error"]["message"]
    codes = [r.status_code for r in quota]
    assert 200 in codes
    assert 429 in codes
    refused = next(r for r in quota if r.status_code == 429).json()["error"]
    assert refused["status"] == "RESOURCE_EXHAUSTED"
    counted = 'modstream_online_calls_total{code="RESOURCE_EXHAUSTED",method="AnalyzeComment"}'
    assert f"{counted} {float(codes.count(429))}" in metrics


async def test_a_call_speaks_for_its_keys_tenant_and_no_other(
    stack_settings: WorkerSettings, database: str, topics: dict[str, str]
) -> None:
    """A key bound to one tenant stores its calls as that tenant's, whatever ``communityId``
    says; a key bound to two is refused (403) for a community naming neither, and the attempt is
    recorded in ``access_denials``; nothing is stored for it."""
    settings = perspective_settings(database, topics)
    conn = await asyncpg.connect(database)
    try:
        one = await create_user(
            conn, f"forum-{uuid.uuid4().hex[:8]}", Role.PLATFORM, None, ["arcade"]
        )
        two = await create_user(
            conn, f"forums-{uuid.uuid4().hex[:8]}", Role.PLATFORM, None, ["arcade", "market"]
        )
        denials_before = await conn.fetchval("SELECT coalesce(max(id), 0) FROM access_denials")
    finally:
        await conn.close()
    community = f"c-{uuid.uuid4().hex[:8]}"
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.perspective_port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            own = await http.post(
                PATH, params={"key": one}, json=_body(CALM, "TOXICITY", communityId=community)
            )
            chosen = await http.post(
                PATH, params={"key": two}, json=_body(CALM, "TOXICITY", communityId="market")
            )
            refused = await http.post(
                PATH, params={"key": two}, json=_body(CALM, "TOXICITY", communityId="bazaar")
            )
    assert own.status_code == 200, own.text
    assert chosen.status_code == 200, chosen.text
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["status"] == "PERMISSION_DENIED"
    conn = await asyncpg.connect(database)
    try:
        stored = await conn.fetch(
            "SELECT group_id, tenant FROM verdicts WHERE source_topic = 'online' "
            "AND group_id = ANY($1::text[]) ORDER BY created_at",
            [community, "market", "bazaar"],
        )
        denials = await conn.fetch(
            "SELECT service, actor_role, tenant FROM access_denials WHERE id > $1",
            denials_before,
        )
    finally:
        await conn.close()
    assert [(r["group_id"], r["tenant"]) for r in stored] == [
        (community, "arcade"),
        ("market", "market"),
    ]
    assert [(d["service"], d["actor_role"], d["tenant"]) for d in denials] == [
        ("online", "platform", "bazaar")
    ]
