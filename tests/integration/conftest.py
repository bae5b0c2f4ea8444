"""Fixtures for tests against the real local stack (``modstream stack up``).

Every test gets its own Kafka topics and consumer group, and the session its own database, so
tests never see each other's records. Endpoints come from the same ``MODSTREAM_*`` settings the
stack uses; nothing here starts or fakes a service.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pydantic import SecretStr

from admin.migrate import apply_migrations, discover
from common.settings import project_root
from worker.settings import WorkerSettings

PARTITIONS = 4


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _dsn_for(dsn: str, database: str) -> str:
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{database}"


@pytest.fixture(scope="session")
def stack_settings() -> WorkerSettings:
    """WorkerSettings pointing at the running stack (fails loudly if it is not up)."""
    return WorkerSettings()


@pytest.fixture(scope="session")
async def database(stack_settings: WorkerSettings) -> AsyncIterator[str]:
    """A freshly created and migrated database for this test session; dropped afterwards."""
    admin_dsn = stack_settings.postgres.dsn.get_secret_value()
    name = f"mstest_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    dsn = _dsn_for(admin_dsn, name)
    conn = await asyncpg.connect(dsn)
    try:
        await apply_migrations(conn, discover(project_root() / "migrations"))
    finally:
        await conn.close()
    yield dsn
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def topics(stack_settings: WorkerSettings) -> AsyncIterator[dict[str, str]]:
    """Unique input/DLQ/verdict/decision topics and consumer group for one test."""
    suffix = uuid.uuid4().hex[:8]
    names = {
        "input_topic": f"it.{suffix}.chat.messages",
        "dlq_topic": f"it.{suffix}.chat.messages.dlq",
        "verdict_topic": f"it.{suffix}.moderation.verdicts",
        "decision_topic": f"it.{suffix}.moderation.decisions",
        "group_id": f"it-{suffix}",
    }
    admin = AIOKafkaAdminClient(bootstrap_servers=stack_settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(names["input_topic"], PARTITIONS, 1),
                NewTopic(names["dlq_topic"], 1, 1),
                NewTopic(names["verdict_topic"], PARTITIONS, 1),
                NewTopic(names["decision_topic"], 1, 1),
            ]
        )
        yield names
        await admin.delete_topics([v for k, v in names.items() if k != "group_id"])
    finally:
        await admin.close()


@pytest.fixture
def worker_settings(
    stack_settings: WorkerSettings, database: str, topics: dict[str, str]
) -> WorkerSettings:
    """WorkerSettings for a worker on this test's topics and the session database."""
    s = stack_settings
    return s.model_copy(
        update={
            "kafka": s.kafka.model_copy(update=topics),
            "postgres": s.postgres.model_copy(update={"dsn": SecretStr(database)}),
            "batch": s.batch.model_copy(update={"max_wait_s": 0.2, "drain_timeout_s": 20.0}),
            "http": s.http.model_copy(update={"port": 0}),
        }
    )


async def wait_until(predicate: object, timeout_s: float, interval_s: float = 0.25) -> None:
    """Poll an async predicate until it returns true; fail the test on timeout."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        if await predicate():  # type: ignore[operator]
            return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"condition not met within {timeout_s:.0f}s")
        await asyncio.sleep(interval_s)
