"""``modstream policy calibrate`` and ``policy apply`` end to end: generated moderator decisions
whose best thresholds are known, read from PostgreSQL as the analyst login, a proposal written
(never the live file), applied by an admin as the worker's login (a moderator's token and a bad
proposal refused, nothing changed), and a running worker on the real Kafka and Triton reloading
the live file and deciding with it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson
import pytest
from prometheus_client import CollectorRegistry

from common.api_tokens import digest, new_token
from engine.metrics import Metrics
from engine.parts import build_parts
from stack.samples import SampleRecord, produce
from tests.integration.conftest import wait_until
from tests.support import temporary_database
from worker.app import Worker
from worker.parts import build_stream_parts
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_HATE_GRID = [i / 100 for i in range(100)]
"""hate scores 0.00 ... 0.99, harmful from 0.70: at precision 0.9 the best threshold is 0.67
(30 harmful of the 33 flagged from there)."""
_OFFENSIVE_GRID = [round(0.9 + i / 1000, 3) for i in range(100)]
"""offensive scores 0.900 ... 0.999, harmful from 0.995: the best threshold is 0.995 (5 of 5;
from 0.994 on, 5 of 6 is below 0.9)."""


def _scores(category: str, score: float) -> dict[str, dict[str, float]]:
    toxicity = {"none": 1.0, "offensive": 0.0, "hate": 0.0}
    intent = {"chat": 1.0, "question": 0.0, "spam": 0.0, "advertisement": 0.0}
    if category == "hate":
        toxicity = {"none": 1.0 - score, "offensive": 0.0, "hate": score}
    elif category == "offensive":
        toxicity = {"none": 1.0 - score, "offensive": score, "hate": 0.0}
    else:
        intent = {"chat": 1.0 - score, "question": 0.0, "spam": score, "advertisement": 0.0}
    return {
        "sentiment": {"negative": 0.2, "neutral": 0.6, "positive": 0.2},
        "intent": intent,
        "toxicity": toxicity,
    }


async def _decide(
    conn: asyncpg.Connection,  # type: ignore[type-arg]
    offset: int,
    category: str,
    score: float,
    *,
    harmful: bool,
    version: str = "2",
    resolved_days_ago: float = 1.0,
    resolved: bool = True,
) -> None:
    """A model-scored verdict and the review item a moderator resolved on it."""
    sent = datetime.now(UTC) - timedelta(days=resolved_days_ago, hours=1)
    await conn.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, text_sha256, decision, decided_by, escalated, "
        "category, scores, model_name, model_version) VALUES ('cal.chat', 0, $1, $2, $3, 'g', "
        "'u', repeat('a', 64), 'flag', 'model', true, $4, $5::jsonb, 'moderation', $6)",
        offset,
        sent,
        f"cal-{offset}",
        category,
        orjson.dumps(_scores(category, score)).decode(),
        version,
    )
    await conn.execute(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, auto_decision, status, "
        "resolution, resolved_by, resolved_at) VALUES ('cal.chat', 0, $1, $2, $3, 'g', 'u', "
        "'text', $4, 'flag', $5, $6, 'mod-1', $7)",
        offset,
        sent,
        f"cal-{offset}",
        category,
        "resolved" if resolved else "open",
        ("ban" if harmful else "approve") if resolved else None,
        sent + timedelta(hours=1) if resolved else None,
    )


async def _seed(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        offset = 0
        for score in _HATE_GRID:
            await _decide(conn, offset, "hate", score, harmful=score >= 0.70 - 1e-9)
            offset += 1
        for score in _OFFENSIVE_GRID:
            await _decide(conn, offset, "offensive", score, harmful=score >= 0.995 - 1e-9)
            offset += 1
        for i in range(20):  # too few for spam
            await _decide(conn, offset, "spam", i / 20, harmful=i >= 10)
            offset += 1
        # Left out: another model version (all harmful would move hate's threshold to 0),
        # decisions older than the window, and items nobody resolved yet.
        for score in _HATE_GRID:
            await _decide(conn, offset, "hate", score, harmful=True, version="1")
            offset += 1
            await _decide(conn, offset, "hate", score, harmful=True, resolved_days_ago=40)
            offset += 1
            await _decide(conn, offset, "hate", score, harmful=True, resolved=False)
            offset += 1
    finally:
        await conn.close()


@pytest.fixture
async def calibration_db(stack_settings: WorkerSettings) -> AsyncIterator[dict[str, str]]:
    """A migrated database with the generated decisions: its superuser DSN (``owner``) and the
    DSNs of an analyst and a worker login (``analyst``, ``worker``)."""
    async with temporary_database(stack_settings, prefix="mstest_calibrate") as scoped:
        dsn = scoped.postgres.dsn.get_secret_value()
        await _seed(dsn)
        logins = {kind: f"mstest_{secrets.token_hex(4)}_{kind}" for kind in ("analyst", "worker")}
        admin = await asyncpg.connect(dsn)
        try:
            for kind, login in logins.items():
                await admin.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE modstream_{kind}')
        finally:
            await admin.close()
        parts = urlsplit(dsn)
        host = parts.netloc.rpartition("@")[2]
        try:
            yield {"owner": dsn} | {
                kind: urlunsplit(parts._replace(netloc=f"{login}@{host}"))
                for kind, login in logins.items()
            }
        finally:
            admin = await asyncpg.connect(stack_settings.postgres.dsn.get_secret_value())
            try:
                for login in logins.values():
                    await admin.execute(f'DROP ROLE IF EXISTS "{login}"')
            finally:
                await admin.close()


def _calibrate(analyst_dsn: str, out: Path, live: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MODSTREAM_POSTGRES__DSN": analyst_dsn,
        "MODSTREAM_POLICY_FILE__PATH": str(live),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "modstream.cli",
            "policy",
            "calibrate",
            "--since",
            "30d",
            "--target-precision",
            "0.9",
            "--model",
            "moderation:2",
            "--out",
            str(out),
            "--resamples",
            "200",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _apply(
    worker_dsn: str, proposal: Path, live: Path, token: str
) -> subprocess.CompletedProcess[str]:
    """``modstream policy apply PROPOSAL`` as the worker's login, the token on standard input."""
    env = {
        **os.environ,
        "MODSTREAM_POSTGRES__DSN": worker_dsn,
        "MODSTREAM_POLICY_FILE__PATH": str(live),
    }
    return subprocess.run(
        [sys.executable, "-m", "modstream.cli", "policy", "apply", str(proposal)],
        env=env,
        input=token + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _add_user(dsn: str, name: str, role: str) -> str:
    """A review user with ``role``; its API token."""
    token = new_token()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO review_users (name, role, token_sha256) VALUES ($1, $2, $3)",
            name,
            role,
            digest(token),
        )
    finally:
        await conn.close()
    return token


async def _applications(dsn: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch("SELECT * FROM policy_applications ORDER BY id"))
    finally:
        await conn.close()


async def test_calibrate_proposes_the_known_thresholds_and_the_worker_decides_with_them(
    calibration_db: dict[str, str], worker_settings: WorkerSettings, tmp_path: Path
) -> None:
    """As the analyst login, the command proposes 0.67 for hate and 0.995 for offensive (the
    thresholds the generated decisions were made for, each with its sample size and interval),
    refuses spam (20 decisions) and advertisement (none), leaves out other versions, old and
    unresolved items, keeps the key the live file already had, saves the report and writes a
    proposal, never the live file. A moderator's token and a proposal with a typo are refused
    and change nothing; an admin's applies it, recorded with the admin's name; a worker already
    running on the real Kafka and Triton reloads the live file and now allows what version 2
    finds offensive at about 0.93-0.98."""
    live = tmp_path / "policy.toml"
    live.write_text("[thresholds]\nblock_offensive = 0.999\n", encoding="utf-8")
    before = live.read_text(encoding="utf-8")
    refused = await asyncio.to_thread(_calibrate, calibration_db["analyst"], live, live)
    assert refused.returncode == 2
    assert "is the live policy file" in refused.stderr
    assert live.read_text(encoding="utf-8") == before

    out = tmp_path / "policy.proposal.toml"
    done = await asyncio.to_thread(_calibrate, calibration_db["analyst"], out, live)
    assert done.returncode == 0, done.stderr
    assert "refused: 20 decisions, fewer than the 50 required" in done.stdout
    assert live.read_text(encoding="utf-8") == before  # a proposal only
    report = orjson.loads(out.with_suffix(".report.json").read_bytes())
    proposals = {p["category"]: p for p in report["proposals"]}
    assert report["decisions"] == 220
    assert (proposals["hate"]["threshold"], proposals["hate"]["decisions"]) == (0.67, 100)
    assert proposals["hate"]["precision"] == pytest.approx(30 / 33)
    low, high = proposals["hate"]["threshold_interval"]
    assert low <= 0.67 <= high
    assert proposals["offensive"]["threshold"] == 0.995
    assert proposals["spam"]["threshold"] is None
    assert proposals["advertisement"]["refused"] == "0 decisions, fewer than the 50 required"
    text = out.read_text(encoding="utf-8")
    assert "flag_hate = 0.67\n" in text
    assert "flag_offensive = 0.995\n" in text
    assert "block_offensive = 0.999\n" in text
    assert "flag_spam" not in text

    # A worker already running on the live file (0.999 over the configured thresholds).
    s = worker_settings.model_copy(
        update={
            "policy_file": worker_settings.policy_file.model_copy(
                update={"path": live, "reload_interval_s": 0.2}
            )
        }
    )
    metrics = Metrics(CollectorRegistry())
    parts = build_stream_parts(
        s, moderation=build_parts(s, consumer_group=s.kafka.group_id, metrics=metrics)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s, parts).run(stop))
    try:
        await _apply_as_admin(calibration_db, out, live, metrics)
        await _decide_with_the_applied_policy(s, task)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
    gauge = metrics.registry.get_sample_value(
        "modstream_policy_threshold", {"threshold": "flag_hate"}
    )
    assert gauge == 0.67


async def _apply_as_admin(db: dict[str, str], proposal: Path, live: Path, metrics: Metrics) -> None:
    """A moderator's token and a bad proposal are refused (nothing changes); the admin's
    applies the proposal, recorded; the running worker's policy watcher installs it."""
    before = await asyncio.to_thread(live.read_bytes)
    moderator = await _add_user(db["owner"], "mod-cal", "moderator")
    admin = await _add_user(db["owner"], "admin-cal", "admin")
    not_admin = await asyncio.to_thread(_apply, db["worker"], proposal, live, moderator)
    assert not_admin.returncode == 3, not_admin.stderr
    assert "not the API token of an enabled admin" in not_admin.stderr
    typo = proposal.with_name("typo.proposal.toml")
    await asyncio.to_thread(typo.write_text, "[thresholds]\nflag_hat = 0.5\n", encoding="utf-8")
    bad = await asyncio.to_thread(_apply, db["worker"], typo, live, admin)
    assert bad.returncode == 2
    assert "'flag_hat' is not a threshold" in bad.stderr
    assert await asyncio.to_thread(live.read_bytes) == before
    assert await _applications(db["owner"]) == []
    assert admin not in not_admin.stderr + bad.stderr + not_admin.stdout + bad.stdout

    applied = await asyncio.to_thread(_apply, db["worker"], proposal, live, admin)
    assert applied.returncode == 0, applied.stderr
    assert "as admin-cal" in applied.stdout
    text = await asyncio.to_thread(live.read_bytes)
    proposed = await asyncio.to_thread(proposal.read_bytes)
    assert text.startswith(b"# applied by admin-cal at ")
    assert text.endswith(proposed)
    (row,) = await _applications(db["owner"])
    assert row["applied_by"] == "admin-cal"
    assert row["proposal_name"] == proposal.name
    assert row["proposal_sha256"] == hashlib.sha256(proposed).hexdigest()
    assert row["target"] == str(live)
    assert orjson.loads(row["thresholds"])["flag_hate"] == pytest.approx(0.67)
    assert orjson.loads(row["previous"])["block_offensive"] == pytest.approx(0.999)

    async def reloaded() -> bool:
        value = metrics.registry.get_sample_value(
            "modstream_policy_threshold", {"threshold": "flag_hate"}
        )
        return value is not None and abs(value - 0.67) < 1e-9

    await wait_until(reloaded, timeout_s=30)
    installed = metrics.registry.get_sample_value(
        "modstream_policy_reloads_total", {"result": "installed"}
    )
    assert installed is not None
    assert installed >= 1


async def _decide_with_the_applied_policy(s: WorkerSettings, task: asyncio.Task[None]) -> None:
    """A message version 2 finds offensive at about 0.93-0.98, allowed by the applied policy."""
    message_id = f"cal-live-{uuid.uuid4().hex[:6]}"
    document = {
        "message_id": message_id,
        "group_id": "g",
        "sender_id": "u",
        "text": "you are dumb",
        "sent_at": datetime.now(UTC).isoformat(),
    }
    await produce(
        s.kafka.bootstrap_servers,
        s.kafka.input_topic,
        [SampleRecord(b"g", orjson.dumps(document), message_id, "x")],
    )
    dsn = s.postgres.dsn.get_secret_value()

    async def decided() -> bool:
        if task.done():
            task.result()
        conn = await asyncpg.connect(dsn)
        try:
            return bool(
                await conn.fetchval(
                    "SELECT count(*) FROM verdicts WHERE message_id = $1", message_id
                )
            )
        finally:
            await conn.close()

    await wait_until(decided, timeout_s=60)
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT decision, model_version, scores FROM verdicts WHERE message_id = $1", message_id
        )
    finally:
        await conn.close()
    assert row is not None
    toxic = 1 - orjson.loads(row["scores"])["toxicity"]["none"]
    assert 0.9 < toxic < 0.995
    assert (row["decision"], row["model_version"]) == ("allow", "2")
