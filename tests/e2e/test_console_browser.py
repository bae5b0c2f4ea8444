"""End to end in a real headless Chromium: sign in, claim, decide, audit row, Kafka decision;
and an appeal refused to the decider and reversed in the console by a second moderator.

Needs ``tests/e2e/install.sh`` (Debian chromium + npm playwright-core) and the stack's Kafka and
PostgreSQL (``modstream stack up``). Skipped only when Kafka is unreachable.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from tests.support import temporary_database

pytestmark = pytest.mark.integration

_HERE = Path(__file__).resolve().parent
_CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")


def _kafka_reachable(bootstrap: str) -> bool:
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                return True
        except OSError:
            continue
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def settings() -> ReviewServiceSettings:
    loaded = ReviewServiceSettings()
    if not _kafka_reachable(loaded.kafka.bootstrap_servers):
        pytest.skip(
            f"Kafka at {loaded.kafka.bootstrap_servers} is not reachable; "
            "start it with `modstream stack up`"
        )
    missing = []
    if not Path(_CHROMIUM).exists():
        missing.append(_CHROMIUM)
    if not (_HERE / "node_modules" / "playwright-core").is_dir():
        missing.append("tests/e2e/node_modules/playwright-core")
    if shutil.which("node") is None:
        missing.append("node")
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run tests/e2e/install.sh")
    return loaded


@pytest.fixture(scope="module")
async def db_settings(settings: ReviewServiceSettings) -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(settings, prefix="modstream_test_e2e") as scoped:
        yield scoped


@pytest.fixture(scope="module")
def server(
    db_settings: ReviewServiceSettings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """``modstream review serve`` on a free port against the test database; (URL, log file)."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("review-server") / "server.log"
    log = log_path.open("wb")
    env = {
        **os.environ,
        "MODSTREAM_POSTGRES__DSN": db_settings.postgres.dsn.get_secret_value(),
        "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": db_settings.kafka.bootstrap_servers,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "modstream.cli", "review", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{base}/console/login", timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"review server did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield base, log_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


_TEXT = "an escalated message: f.u.c.k y0u, for the e2e test"
_MARKED = "f.u.c.k y0u"
_EARLIER = "an earlier message of the room, still waiting for the model"


async def _seed(conn: Any, message_id: str) -> int:
    """The escalated message (its rule hit marks ``_MARKED``) and, a minute before it, another
    sender's message of the same room whose text is retained."""
    sent_at = datetime.now(UTC)
    start = _TEXT.index(_MARKED)
    hits = [
        {
            "rule_id": "en.slur.1",
            "category": "hate",
            "severity": "high",
            "action": "flag",
            "spans": [[start, start + len(_MARKED)]],
        }
    ]
    await conn.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, category, priority, "
        "rule_hits, scores, model_name, model_version) VALUES ('chat.messages', 0, 42, $1, $2, "
        "'e2e-room', 'e2e-sender', repeat('b', 64), 'flag', 'model', true, 'hate', 0.7, "
        "$3::jsonb, "
        '\'{"toxicity": {"none": 0.3, "offensive": 0.1, "hate": 0.6}}\', \'moderation\', \'1\')',
        sent_at,
        message_id,
        json.dumps(hits),
    )
    earlier = sent_at - timedelta(minutes=1)
    await conn.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, priority) VALUES "
        "('chat.messages', 0, 41, $1, $2, 'e2e-room', 'e2e-other', repeat('c', 64), 'allow', "
        "'pending_model', false, 0)",
        earlier,
        f"{message_id}-earlier",
    )
    await conn.execute(
        "INSERT INTO pending_texts (source_topic, source_partition, source_offset, sent_at, "
        "message_text) VALUES ('chat.messages', 0, 41, $1, $2)",
        earlier,
        _EARLIER,
    )
    item_id: int = await conn.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision) "
        "VALUES ('chat.messages', 0, 42, $1, $2, 'e2e-room', 'e2e-sender', $3, 'hate', 0.7, "
        "'flag') RETURNING id",
        sent_at,
        message_id,
        _TEXT,
    )
    return item_id


async def _consume_decision(
    settings: ReviewServiceSettings, message_id: str, timeout_s: float, kind: str | None = None
) -> Any:
    """The first record on the decision topic about ``message_id`` whose ``type`` is ``kind``
    (``None``: a moderator's decision; ``appeal_outcome``: a correction)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        settings.kafka.decision_topic,
        bootstrap_servers=settings.kafka.bootstrap_servers,
        group_id=f"modstream-e2e-{secrets.token_hex(4)}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for record in records:
                    payload = json.loads(record.value)
                    if payload.get("message_id") == message_id and payload.get("type") == kind:
                        return {"key": record.key.decode(), **payload}
        return None
    finally:
        await consumer.stop()


async def _run_browser(script: str, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    """Run a browser script of this folder; its JSON result line and its whole stdout."""
    run = await asyncio.to_thread(
        subprocess.run,
        ["node", script],
        cwd=_HERE,
        env={**os.environ, "E2E_CHROMIUM": _CHROMIUM, **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result from the browser script: {run.stdout[-2000:]} {run.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["ok"], result
    assert run.returncode == 0
    return result, run.stdout


async def test_console_sign_in_claim_decide_audit_and_kafka(
    db_settings: ReviewServiceSettings, server: tuple[str, Path], tmp_path: Path
) -> None:
    """A moderator signs in, claims the top item, decides by keyboard; audit and Kafka agree."""
    message_id = f"e2e-{secrets.token_hex(6)}"
    reason = f"e2e reason {secrets.token_hex(3)}"
    conn = await asyncpg.connect(db_settings.postgres.dsn.get_secret_value())
    try:
        token = await create_user(conn, "e2e_mod", Role.MODERATOR)
        item_id = await _seed(conn, message_id)
        public_id = await conn.fetchval(
            "SELECT public_id::text FROM review_items WHERE id = $1", item_id
        )
    finally:
        await conn.close()

    result, stdout = await _run_browser(
        "console.e2e.mjs",
        {
            "E2E_BASE_URL": server[0],
            "E2E_TOKEN": token,
            "E2E_REASON": reason,
            "E2E_USER": "e2e_mod",
            "E2E_SCREENSHOT": str(tmp_path / "failure.png"),
        },
    )
    assert result["itemId"] == public_id
    assert result["marked"] == [_MARKED]
    assert result["conversation"] == [
        {"sender": "e2e-other", "same": False, "text": _EARLIER},
        {"sender": "e2e-sender", "same": True, "text": ""},
    ]
    assert token not in stdout
    assert token not in server[1].read_text(errors="replace"), "the token reached the server log"

    conn = await asyncpg.connect(db_settings.postgres.dsn.get_secret_value())
    try:
        item = await conn.fetchrow("SELECT * FROM review_items WHERE id = $1", item_id)
        events = await conn.fetch(
            "SELECT actor, action, reason FROM review_events WHERE review_item_id = $1 ORDER BY id",
            item_id,
        )
        published = await conn.fetchval(
            "SELECT published_at IS NOT NULL FROM review_decision_outbox"
        )
    finally:
        await conn.close()
    assert (item["status"], item["resolution"], item["resolved_by"]) == (
        "resolved",
        "remove_message",
        "e2e_mod",
    )
    assert [(e["actor"], e["action"]) for e in events] == [
        ("e2e_mod", "claim"),
        ("e2e_mod", "view_text"),
        ("e2e_mod", "remove_message"),
    ]
    assert events[-1]["reason"] == reason

    decision = await _consume_decision(db_settings, message_id, timeout_s=30)
    assert decision is not None, "the decision never reached Kafka"
    assert published
    assert decision["key"] == "e2e-room"
    assert decision["action"] == "remove_message"
    assert decision["moderator"] == "e2e_mod"
    assert decision["reason"] == reason
    assert decision["review_item_id"] == item_id


_STATEMENT = (
    '<script>window.__appealXss = 1</script><img src="x" onerror="window.__appealXss = 2">'
    "I was quoting what they said to me, not insulting anyone."
)


async def _seed_appealed(conn: Any, message_id: str) -> str:
    """An escalated message of its own room (offset 142) with its rule hit; its item's id."""
    sent_at = datetime.now(UTC) - timedelta(minutes=10)
    hits = [{"rule_id": "en.insult", "category": "offensive", "severity": "medium",
             "action": "flag", "spans": [[0, 5]]}]  # fmt: skip
    await conn.execute(
        "INSERT INTO verdicts (source_topic, source_partition, source_offset, sent_at, message_id, "
        "group_id, sender_id, text_sha256, decision, decided_by, escalated, category, priority, "
        "rule_hits) VALUES ('chat.messages', 0, 142, $1, $2, 'e2e-appeal-room', 'e2e-appellant', "
        "repeat('d', 64), 'flag', 'rules', true, 'offensive', 0.5, $3::jsonb)",
        sent_at,
        message_id,
        json.dumps(hits),
    )
    item_id: str = await conn.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision) "
        "VALUES ('chat.messages', 0, 142, $1, $2, 'e2e-appeal-room', 'e2e-appellant', "
        "'idiot, you said it first', 'offensive', 0.5, 'flag') RETURNING public_id::text",
        sent_at,
        message_id,
    )
    return item_id


async def test_console_appeal_refused_to_the_decider_and_reversed_by_another(
    db_settings: ReviewServiceSettings, server: tuple[str, Path], tmp_path: Path
) -> None:
    """e2e_alice mutes a sender over the API and the platform appeals her decision with a
    statement full of markup; in the browser alice is refused the appeal (own_decision) and
    e2e_bob claims it from the appeals queue, reads the statement as text and alice's decision,
    and reverses it. The database, the audit trail and the correction on Kafka agree."""
    base, log_path = server
    message_id = f"e2e-appeal-{secrets.token_hex(6)}"
    reason = f"quoted abuse, e2e {secrets.token_hex(3)}"
    conn = await asyncpg.connect(db_settings.postgres.dsn.get_secret_value())
    try:
        alice = await create_user(conn, "e2e_alice", Role.MODERATOR)
        bob = await create_user(conn, "e2e_bob", Role.MODERATOR)
        platform = await create_user(conn, "e2e_platform", Role.PLATFORM)
        original_item = await _seed_appealed(conn, message_id)
    finally:
        await conn.close()
    async with httpx.AsyncClient(base_url=base, timeout=30) as api:
        as_alice = {"Authorization": f"Bearer {alice}"}
        claimed = await api.post(f"/api/items/{original_item}/claim", headers=as_alice)
        assert claimed.status_code == 200, claimed.text
        decided = await api.post(
            f"/api/items/{original_item}/decide",
            headers=as_alice,
            json={"action": "mute", "reason": "name-calling"},
        )
        assert decided.status_code == 200, decided.text
        filed = await api.post(
            "/api/appeals",
            headers={"Authorization": f"Bearer {platform}"},
            json={
                "appeal_id": f"e2e-{message_id}",
                "decision_id": decided.json()["decision_id"],
                "appellant_id": "e2e-appellant",
                "statement": _STATEMENT,
            },
        )
        assert filed.status_code == 201, filed.text
    appeal_item = filed.json()["item_id"]

    result, stdout = await _run_browser(
        "appeal.e2e.mjs",
        {
            "E2E_BASE_URL": base,
            "E2E_APPEAL_ITEM": appeal_item,
            "E2E_DECIDER": "e2e_alice",
            "E2E_DECIDER_TOKEN": alice,
            "E2E_HANDLER": "e2e_bob",
            "E2E_HANDLER_TOKEN": bob,
            "E2E_REASON": reason,
            "E2E_SCREENSHOT": str(tmp_path / "failure.png"),
        },
    )
    assert result["refusal"]["code"] == "own_decision"
    assert "another moderator must handle it" in result["refusal"]["detail"]
    assert appeal_item not in result["deciderListed"]
    assert appeal_item in result["handlerListed"]
    assert result["shownStatement"] == _STATEMENT
    assert result["original"] == {
        "moderator": "e2e_alice",
        "action": "mute",
        "reason": "name-calling",
    }
    assert result["outcome"].startswith("reversed by e2e_bob")
    for token in (alice, bob, platform):
        assert token not in stdout
    server_log = log_path.read_text(errors="replace")
    assert "quoting what they said" not in server_log, "the statement reached the server log"
    assert reason not in server_log, "the outcome's reason reached the server log"

    conn = await asyncpg.connect(db_settings.postgres.dsn.get_secret_value())
    try:
        appeal = await conn.fetchrow(
            "SELECT a.* FROM appeals a JOIN review_items r ON r.id = a.review_item_id "
            "WHERE r.public_id = $1",
            appeal_item,
        )
        events = await conn.fetch(
            "SELECT e.actor, e.action, e.reason, e.details FROM review_events e "
            "JOIN review_items r ON r.id = e.review_item_id WHERE r.public_id = $1 ORDER BY e.id",
            appeal_item,
        )
        live_strikes = await conn.fetchval(
            "SELECT count(*) FROM sender_strikes WHERE sender_id = 'e2e-appellant' "
            "AND expires_at > now()"
        )
    finally:
        await conn.close()
    assert appeal is not None
    assert (appeal["status"], appeal["decided_by"], appeal["outcome_reason"]) == (
        "reversed",
        "e2e_bob",
        reason,
    )
    assert appeal["strikes_lifted"] == 2
    assert live_strikes == 0
    assert [(e["actor"], e["action"]) for e in events] == [
        ("e2e_platform", "appeal_filed"),
        ("e2e_bob", "claim"),
        ("e2e_bob", "view_text"),
        ("e2e_bob", "reversed"),
    ]
    assert json.loads(events[2]["details"])["appeal_statement"] is True
    assert events[-1]["reason"] == reason

    correction = await _consume_decision(
        db_settings, message_id, timeout_s=30, kind="appeal_outcome"
    )
    assert correction is not None, "the correction never reached Kafka"
    assert correction["action"] == "appeal_reversed"
    assert correction["moderator"] == "e2e_bob"
    assert correction["reason"] == reason
    assert correction["corrects"]["moderator"] == "e2e_alice"
    assert correction["corrects"]["decision_id"] == decided.json()["decision_id"]
    assert "statement" not in correction
