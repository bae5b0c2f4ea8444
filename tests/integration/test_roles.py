"""Least-privilege roles (migrations/0020_roles.sql) checked against the real server.

Each test connects as a throw-away login that is a member of one group role, exactly as a
deployment would; the logins are unique per run (roles are cluster-wide) and dropped afterwards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from pydantic import SecretStr

from admin.migrate import migrate
from admin.retention import apply_retention
from common.settings import PostgresSettings, ServiceSettings, project_root
from engine.stores.database import Database
from engine.stores.partitions import ensure_verdict_partitions
from engine.stores.pending_texts import PendingText, PendingTextStore, RescoreRejection
from engine.stores.review_items import Escalation
from engine.stores.shadow_verdicts import ShadowVerdictStore
from engine.stores.strikes import StrikeStore
from engine.stores.verdict_batches import DeadLetter, VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.messages import SourcePosition
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision, PolicyResult, Verdict
from review.auth import (
    authenticate_session,
    authenticate_token,
    create_user,
    disable_user,
    end_session,
    start_session,
)
from review.decisions import OutboxRelay
from review.queue import ReviewQueue
from review.schemas import Action, QueueFilter, Role
from review.settings import ReviewSettings
from tests.support import MemoryPublisher, temporary_database
from worker.rescan_plan import OffsetRange, RescanPlan
from worker.rescan_review import Redecided, ReviewState
from worker.rescan_store import RescanStore

pytestmark = pytest.mark.integration

_GROUPS = ("owner", "worker", "review", "analyst")
_SCORES = ModelScores((0.2, 0.6, 0.2), (0.7, 0.1, 0.1, 0.1), (0.9, 0.05, 0.05))


@dataclass(frozen=True, slots=True)
class Logins:
    """DSNs of one login per group role, on the test database, and the superuser's DSN."""

    admin: str
    by_group: dict[str, str]
    names: dict[str, str]


def _dsn_as(dsn: str, user: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


@pytest.fixture(scope="module")
async def logins() -> AsyncIterator[Logins]:
    base = ServiceSettings()
    suffix = secrets.token_hex(4)
    names = {group: f"mstest_{suffix}_{group}" for group in _GROUPS}
    async with temporary_database(base, prefix="modstream_test_roles") as scoped:
        admin_dsn = scoped.postgres.dsn.get_secret_value()
        admin = await asyncpg.connect(admin_dsn)
        try:
            for group, login in names.items():
                await admin.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE modstream_{group}')
        finally:
            await admin.close()
        try:
            yield Logins(
                admin=admin_dsn,
                by_group={g: _dsn_as(admin_dsn, login) for g, login in names.items()},
                names=names,
            )
        finally:
            admin = await asyncpg.connect(base.postgres.dsn.get_secret_value())
            try:
                for login in names.values():
                    # The logins own nothing; anything the owner login created left with the
                    # database, so only its privileges elsewhere (none) would remain.
                    await admin.execute(f'DROP ROLE IF EXISTS "{login}"')
            finally:
                await admin.close()


def _verdict(offset: int, sent_at: datetime, decided_by: DecidedBy) -> Verdict:
    return Verdict(
        position=SourcePosition("roles.chat", 0, offset),
        message_id=f"m-{offset}",
        group_id="g-roles",
        sender_id="u-roles",
        sent_at=sent_at,
        text_sha256=hashlib.sha256(str(offset).encode()).hexdigest(),
        rule_hits=(),
        scores=None,
        result=PolicyResult(Decision.FLAG, decided_by, True, "spam", 0.5, ("rule:roles",)),
        model_name=None,
        model_version=None,
        batch_id=None,
        queue_ms=1.0,
        inference_ms=None,
    )


async def _denied(dsn: str, sql: str, *args: Any) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql, *args)
    except asyncpg.InsufficientPrivilegeError:
        return True
    finally:
        await conn.close()
    return False


async def test_worker_role_runs_its_whole_write_path(logins: Logins) -> None:
    """As modstream_worker, every store call the daemon and rescore make succeeds."""
    settings = PostgresSettings(dsn=SecretStr(logins.by_group["worker"]))
    now = datetime.now(UTC)
    pending = _verdict(1, now, DecidedBy.PENDING_MODEL)
    decided = _verdict(2, now, DecidedBy.MODEL)
    refused = _verdict(5, now, DecidedBy.PENDING_MODEL)
    async with Database(settings) as database:
        batches = VerdictBatchStore(database, "roles-group")
        outbox = VerdictOutboxStore(database)
        pending_store = PendingTextStore(database)
        await ensure_verdict_partitions(database)
        await batches.write(
            VerdictBatch(
                verdicts=[pending, decided, refused],
                escalations=[Escalation(decided, "text for a moderator")],
                dead_letters=[DeadLetter(SourcePosition("roles.chat", 0, 3), "bad", "bad", 9)],
                offsets={("roles.chat", 0): 4},
                pending_texts=[
                    PendingText(pending.position, pending.sent_at, "pending text"),
                    PendingText(refused.position, refused.sent_at, "refused text"),
                ],
            )
        )
        assert await batches.stored_offsets("roles.chat", [0]) == {0: 4}
        await outbox.mark_published([(decided.position, decided.sent_at)])
        rows = await pending_store.pending_model_rows(10)
        assert {r.facts.position for r in rows} == {pending.position, refused.position}
        rescored = _verdict(1, now, DecidedBy.MODEL)
        updated = await pending_store.apply_rescore(
            [rescored],
            [Escalation(rescored, "pending text")],
            [pending.position],
            [RescoreRejection(refused.position, refused.sent_at, "triton INVALID_ARGUMENT")],
        )
        assert updated == {pending.position}
        assert await pending_store.drop_orphan_texts() == 0
        unpublished = await outbox.unpublished(0.0, 10)
        assert sorted(r["source_offset"] for r in unpublished) == [1, 5]
        assert await StrikeStore(database).sender_strikes(["u-roles"]) == {"u-roles": 0}
        shadow = dataclasses.replace(
            decided, scores=_SCORES, model_name="moderation", model_version="1"
        )
        await ShadowVerdictStore(database).write([shadow])
    admin = await asyncpg.connect(logins.admin)
    try:
        assert await admin.fetchval("SELECT count(*) FROM review_items") == 2
        assert await admin.fetchval("SELECT count(*) FROM dead_letters") == 1
        assert await admin.fetchval("SELECT count(*) FROM rescore_rejections") == 1
        assert await admin.fetchval("SELECT count(*) FROM pending_texts") == 0
        assert await admin.fetchval("SELECT count(*) FROM shadow_verdicts") == 1
    finally:
        await admin.close()


async def test_worker_role_applies_a_rescan_batch_around_decided_items(logins: Logins) -> None:
    """As modstream_worker, a rescan reads the items' states and strikes as of a moment, keeps
    the verdict whose item an admin resolved (the would-be beside it), updates the others,
    closes the waiting item with a system event and opens one for a new escalation: through the
    owner's functions only, the login still reading no item status itself."""
    settings = PostgresSettings(dsn=SecretStr(logins.by_group["worker"]))
    now = datetime.now(UTC)
    held, waiting, fresh = (_verdict(o, now, DecidedBy.MODEL) for o in (11, 12, 13))
    fresh = dataclasses.replace(
        fresh, result=PolicyResult(Decision.ALLOW, DecidedBy.MODEL, False, None, 0.0, ())
    )
    async with Database(settings) as database:
        await ensure_verdict_partitions(database)
        await VerdictBatchStore(database, "roles-rescan").write(
            VerdictBatch(
                verdicts=[held, waiting, fresh],
                escalations=[Escalation(held, "held text"), Escalation(waiting, "waiting text")],
                dead_letters=[],
                offsets={("roles.chat", 0): 14},
            )
        )
    admin = await asyncpg.connect(logins.admin)
    try:
        await admin.execute(
            "UPDATE review_items SET status = 'resolved', resolution = 'ban', resolved_by = 'a', "
            "resolved_at = now() WHERE source_offset = 11"
        )
    finally:
        await admin.close()
    allow = PolicyResult(Decision.ALLOW, DecidedBy.MODEL, False, None, 0.0, ())
    escalate = PolicyResult(Decision.FLAG, DecidedBy.MODEL, True, "spam", 0.6, ("grey_zone",))
    plan = RescanPlan(
        rescan_id=uuid.uuid4(),
        topic="roles.chat",
        group_id=None,
        since=now - timedelta(hours=1),
        until=now + timedelta(hours=1),
        model_name="moderation",
        model_version="2",
        apply=True,
        ranges=(OffsetRange(0, 11, 14),),
        report={},
    )
    redecided = [
        Redecided(dataclasses.replace(v, result=r, model_version="2"), True, "text")
        for v, r in ((held, allow), (waiting, allow), (fresh, escalate))
    ]
    async with Database(settings) as database:
        store = RescanStore(database)
        await store.create(plan)
        stored = await store.stored(
            "roles.chat", [(v.position, now) for v in (held, waiting, fresh)]
        )
        assert [stored[v.position].review for v in (held, waiting, fresh)] == [
            ReviewState.HELD,
            ReviewState.WAITING,
            ReviewState.NONE,
        ]
        applied = await store.commit_batch(
            plan.rescan_id,
            next_offsets={0: 14},
            report=lambda _: {},
            decided=redecided,
            model="moderation:2",
        )
        assert applied.updated == {waiting.position, fresh.position}
        assert (applied.kept, applied.kept_differs, applied.stamped) == (1, 1, 2)
        assert (applied.closed, applied.opened) == (1, 1)
        assert await StrikeStore(database).strikes_at([("u-roles", now)]) == [0]
    admin = await asyncpg.connect(logins.admin)
    try:
        rows = await admin.fetch(
            "SELECT source_offset, decision, rescan_decision FROM verdicts "
            "WHERE source_offset IN (11, 12, 13) ORDER BY 1"
        )
        assert [(r["decision"], r["rescan_decision"]) for r in rows] == [
            ("flag", "allow"),
            ("allow", None),
            ("flag", None),
        ]
        items = await admin.fetch(
            "SELECT source_offset, status FROM review_items WHERE source_offset IN (11, 12, 13) "
            "ORDER BY 1"
        )
        assert [r["status"] for r in items] == ["resolved", "closed", "open"]
        assert (
            await admin.fetchval(
                "SELECT count(*) FROM review_events WHERE actor = 'rescan' AND action = 'close'"
            )
            == 1
        )
    finally:
        await admin.close()


async def test_worker_writes_into_a_partition_the_worker_created(logins: Logins) -> None:
    """A partition made later by the worker's own call needs no grants for the worker to write."""
    settings = PostgresSettings(dsn=SecretStr(logins.by_group["worker"]))
    # ensure_partitions(6) covers last month .. seven months ahead; 0001 made only four.
    sent_at = (datetime.now(UTC).replace(day=1) + timedelta(days=6 * 31)).replace(day=15)
    async with Database(settings) as database:
        await ensure_verdict_partitions(database, months_ahead=6)
        await VerdictBatchStore(database, "roles-group").write(
            VerdictBatch(verdicts=[_verdict(100, sent_at, DecidedBy.MODEL)])
        )
    admin = await asyncpg.connect(logins.admin)
    try:
        where = await admin.fetchval(
            "SELECT tableoid::regclass::text FROM verdicts WHERE source_offset = 100"
        )
        owner = await admin.fetchval(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = $1", where
        )
    finally:
        await admin.close()
    assert where == f"verdicts_{sent_at:%Y_%m}"
    assert owner == "modstream_owner"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM review_events",
        "SELECT * FROM review_users",
        "SELECT * FROM review_sessions",
        "SELECT * FROM review_decision_outbox",
        "SELECT message_text FROM review_items",
        "SELECT action FROM sender_strikes",
        "INSERT INTO review_events (review_item_id, actor, action) VALUES (1, 'w', 'approve')",
        "UPDATE review_items SET status = 'resolved'",
        "DELETE FROM verdicts",
        "UPDATE verdicts SET text_sha256 = 'x'",
        "DELETE FROM consumer_offsets",
        "CREATE TABLE worker_made (x int)",
        "CREATE TEMP TABLE worker_temp (x int)",
    ],
)
async def test_worker_role_is_refused_review_data_and_ddl(logins: Logins, sql: str) -> None:
    """modstream_worker cannot read review events, users or sessions, nor delete or do DDL."""
    assert await _denied(logins.by_group["worker"], sql)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id,"
        " group_id, sender_id, text_sha256, decision, decided_by) VALUES ('t', 0, 0, now(), 'm',"
        " 'g', 's', 'h', 'allow', 'rules')",
        "UPDATE verdicts SET decision = 'block'",
        "DELETE FROM verdicts",
        "SELECT text_sha256 FROM verdicts",
        "SELECT * FROM pending_texts",
        "SELECT * FROM consumer_offsets",
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, auto_decision) VALUES "
        "('t', 0, 0, now(), 'm', 'g', 's', 'x', 'flag')",
        "DELETE FROM review_events",
        "UPDATE review_events SET reason = 'rewritten'",
        "SELECT modstream_ensure_verdict_partitions(current_date, 1)",
    ],
)
async def test_review_role_cannot_write_verdicts(logins: Logins, sql: str) -> None:
    """modstream_review never writes verdicts, the text hash or the audit trail's past."""
    assert await _denied(logins.by_group["review"], sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM verdicts",
        "SELECT * FROM review_items",
        "INSERT INTO consumer_offsets VALUES ('g', 't', 0, 1)",
        "UPDATE review_items SET status = 'open'",
        "DELETE FROM review_users",
        "CREATE TABLE analyst_made (x int)",
        "CREATE TEMP TABLE analyst_temp (x int)",
        "SELECT modstream_ensure_verdict_partitions(current_date, 1)",
    ],
)
async def test_analyst_role_cannot_write_or_read_tables(logins: Logins, sql: str) -> None:
    """modstream_analyst can neither write anything nor read the tables behind the views."""
    assert await _denied(logins.by_group["analyst"], sql)


async def test_analyst_role_reads_the_views(logins: Logins) -> None:
    """modstream_analyst still reads the documented views after the owner change."""
    conn = await asyncpg.connect(logins.by_group["analyst"])
    try:
        assert await conn.fetchval("SELECT count(*) FROM analytics_verdicts") >= 0
        assert await conn.fetchval("SELECT count(*) FROM analytics_review_events") >= 0
        assert await conn.fetchval("SELECT count(*) FROM analytics_shadow_agreement") >= 0
        assert await conn.fetchval("SELECT count(*) FROM analytics_shadow_flips") >= 0
        for view in (
            "analytics_appeals",
            "analytics_appeal_rates",
            "analytics_appeal_rates_by_moderator",
            "analytics_review_queues",
        ):
            assert await conn.fetchval(f"SELECT count(*) FROM {view}") >= 0  # noqa: S608
        assert await _denied(logins.by_group["analyst"], "SELECT statement FROM appeals")
    finally:
        await conn.close()


async def test_review_role_runs_a_moderation_flow(logins: Logins) -> None:
    """As modstream_review: add a user, sign in, list, claim, read context, decide, publish."""
    worker = PostgresSettings(dsn=SecretStr(logins.by_group["worker"]))
    item = _verdict(200, datetime.now(UTC), DecidedBy.MODEL)
    async with Database(worker) as database:
        await VerdictBatchStore(database, "roles-group").write(
            VerdictBatch(verdicts=[item], escalations=[Escalation(item, "look at me")])
        )
    pool = await asyncpg.create_pool(logins.by_group["review"], min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            token = await create_user(conn, "roles_mod", Role.MODERATOR)
            user = await authenticate_token(conn, token)
            assert user is not None
            session_id = await start_session(conn, user, 600)
            assert await authenticate_session(conn, session_id) is not None
            await end_session(conn, session_id)
        queue = ReviewQueue(pool, ReviewSettings())
        assert await queue.list_items(user, QueueFilter())
        assert await queue.counts(user)
        claim = await queue.claim_next(user, QueueFilter(group_id="g-roles"))
        assert claim is not None
        context = await queue.context(user, claim.item_id)
        assert context is not None
        result = await queue.decide(user, claim.item_id, Action.WARN, "rude")
        assert result.decision_id is not None
        assert await OutboxRelay(pool, MemoryPublisher(), "moderation.decisions").flush() == 1
        assert await queue.is_published(result.decision_id)
        assert await queue.events(user, item_id=claim.item_id)
        async with pool.acquire() as conn:
            assert await disable_user(conn, "roles_mod")
    finally:
        await pool.close()
    async with Database(worker) as database:
        assert (await StrikeStore(database).sender_strikes(["u-roles"]))["u-roles"] == 1


async def test_owner_member_applies_later_migrations_and_retention(
    logins: Logins, tmp_path: Path
) -> None:
    """A login in modstream_owner (not a superuser) runs new DDL migrations and retention."""
    folder = tmp_path / "migrations"
    shutil.copytree(project_root() / "migrations", folder)
    (folder / "9999_probe.sql").write_text(
        "CREATE TABLE roles_probe (id integer PRIMARY KEY);\n"
        "ALTER TABLE roles_probe OWNER TO modstream_owner;\n"
        "ALTER TABLE verdicts ADD COLUMN roles_probe text;\n",
        encoding="utf-8",
    )
    owner = ServiceSettings().model_copy(
        update={"postgres": PostgresSettings(dsn=SecretStr(logins.by_group["owner"]))}
    )
    assert await migrate(owner, folder) == [9999]
    conn = await asyncpg.connect(logins.by_group["owner"])
    try:
        report = await apply_retention(conn, timedelta(days=3650), ahead_months=8)
    finally:
        await conn.close()
    assert report is not None
    assert await _denied(logins.by_group["worker"], "SELECT * FROM roles_probe")


async def test_fresh_database_migrates_as_a_deployment_login() -> None:
    """A non-superuser CREATEROLE login owning the database applies every migration."""
    base = ServiceSettings()
    admin_dsn = base.postgres.dsn.get_secret_value()
    suffix = secrets.token_hex(4)
    login, database = f"mstest_{suffix}_migrator", f"modstream_test_roles_{suffix}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE ROLE "{login}" LOGIN CREATEROLE')
        await admin.execute(f'CREATE DATABASE "{database}" OWNER "{login}"')
    finally:
        await admin.close()
    dsn = _dsn_as(admin_dsn, login).rpartition("/")[0] + f"/{database}"
    try:
        settings = base.model_copy(update={"postgres": PostgresSettings(dsn=SecretStr(dsn))})
        applied = await migrate(settings)
        conn = await asyncpg.connect(dsn)
        try:
            owners = await conn.fetch(
                "SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class "
                "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p', 'v')"
            )
        finally:
            await conn.close()
    finally:
        admin = await asyncpg.connect(admin_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            await admin.execute(f'DROP ROLE IF EXISTS "{login}"')
        finally:
            await admin.close()
    assert 20 in applied
    assert [r["owner"] for r in owners] == ["modstream_owner"]
