"""ghz, a gRPC load tool nobody here wrote, drives the online service open loop: every call is
answered, stored and published once."""

from __future__ import annotations

import asyncpg
import pytest

from bench.ghz import find_ghz, ghz_load
from review.schemas import Role
from tests.integration.online_support import make_token, online_settings_for, running_service

pytestmark = pytest.mark.integration

TEXTS = [
    "good morning everyone",
    "anyone up for a match tonight?",
    "FREE MONEY!!! click http://win-prizes.example.com now to claim your reward",
    "今天天气不错 一起去公园吧",
]


async def test_an_open_loop_ghz_run_gets_one_stored_verdict_per_call(
    database: str, topics: dict[str, str]
) -> None:
    """50 calls/s for 2 s from ``ghz --async --rps``: all OK, one verdict row per call (every
    call a new message id), each published."""
    ghz = find_ghz()
    assert ghz is not None, "ghz is missing: scripts/bootstrap.sh builds it (go install)"
    conn = await asyncpg.connect(database)
    try:
        await conn.execute("DELETE FROM verdicts WHERE message_id LIKE 'ghz-%'")
    finally:
        await conn.close()
    settings = online_settings_for(database, topics)
    token = await make_token(database, Role.PLATFORM)
    async with running_service(settings) as service:
        assert service.port is not None
        run = await ghz_load(
            ghz,
            port=service.port,
            token=token,
            texts=TEXTS,
            rate=50,
            seconds=2,
            deadline_s=5.0,
        )
    assert set(run.statuses) == {"OK"}
    assert 90 <= run.statuses["OK"] <= 110
    assert len(run.latencies_ms) == run.statuses["OK"]
    conn = await asyncpg.connect(database)
    try:
        rows = await conn.fetch(
            "SELECT decided_by, published FROM verdicts "
            "WHERE source_topic = 'online' AND message_id LIKE 'ghz-%'"
        )
    finally:
        await conn.close()
    assert len(rows) == run.statuses["OK"]
    assert all(r["published"] for r in rows)
    assert {r["decided_by"] for r in rows} <= {"model", "rules"}
