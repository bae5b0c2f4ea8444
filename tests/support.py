"""Test seams shared by the test suites: a throw-away migrated database, an in-memory publisher,
the ``modstream rescore`` command run as a user runs it."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from pydantic import SecretStr

from admin.migrate import migrate
from common.settings import ServiceSettings, project_root
from review.errors import PublishFailedError
from worker.settings import WorkerSettings

__all__ = [
    "MemoryPublisher",
    "run_rescore",
    "stored_verdict_row",
    "temporary_database",
    "with_database",
]

S = TypeVar("S", bound=ServiceSettings)


def with_database(settings: S, database: str) -> S:
    """``settings`` with the Postgres DSN pointing at another database on the same server."""
    parts = urlsplit(settings.postgres.dsn.get_secret_value())
    dsn = urlunsplit(parts._replace(path="/" + database))
    postgres = settings.postgres.model_copy(update={"dsn": SecretStr(dsn)})
    return settings.model_copy(update={"postgres": postgres})


@asynccontextmanager
async def temporary_database(settings: S, prefix: str = "modstream_test") -> AsyncIterator[S]:
    """Create a fresh database, apply every migration, yield settings for it, then drop it."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    scoped = with_database(settings, name)
    try:
        await migrate(scoped)
        yield scoped
    finally:
        admin = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def run_command(
    settings: WorkerSettings,
    *args: str,
    env: Mapping[str, str | None] | None = None,
    timeout_s: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """``modstream ARGS`` in a process of its own, against the database, Kafka and Triton that
    ``settings`` name (the command reads them from its environment); ``env`` adds variables
    (``None``: removes one)."""
    environment = dict(os.environ)
    environment.update(
        {
            "MODSTREAM_POSTGRES__DSN": settings.postgres.dsn.get_secret_value(),
            "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": settings.kafka.verdict_topic,
            "MODSTREAM_TRITON__GRPC_URL": settings.triton.grpc_url,
        }
    )
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "modstream.cli", *args],
        env=environment,
        cwd=project_root(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


async def run_rescore(settings: WorkerSettings, topic: str) -> subprocess.CompletedProcess[str]:
    """``modstream rescore --topic topic`` in a process of its own (:func:`run_command`)."""
    return await run_command(settings, "rescore", "--topic", topic)


class MemoryPublisher:
    """A Kafka publisher that keeps ``(key, value)`` records in a list (and their topics);
    ``failing`` makes it refuse them."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes]] = []
        self.topics: list[str] = []
        self.failing = False

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        if self.failing:
            raise PublishFailedError("memory publisher set to fail")
        for key, value in records:
            self.topics.append(topic)
            self.records.append((key, value))


def stored_verdict_row(offset: int, *, scored: bool = True, sent_at: datetime) -> dict[str, Any]:
    """A ``verdicts`` row as the outbox reads it (JSON columns as text)."""
    return {
        "source_topic": "chat.messages",
        "source_partition": 1,
        "source_offset": offset,
        "sent_at": sent_at,
        "message_id": f"m-{offset}",
        "group_id": "g-1",
        "sender_id": "u-1",
        "decision": "flag",
        "decided_by": "model" if scored else "pending_model",
        "escalated": False,
        "category": "spam" if scored else None,
        "priority": 0.25,
        "reasons": ["spam>=0.70"] if scored else ["model:pending"],
        "rule_hits": '[{"rule_id": "r1", "category": "spam", "severity": "low", "action": "flag"}]',
        "scores": '{"toxicity": {"none": 0.9, "offensive": 0.05, "hate": 0.05}}'
        if scored
        else None,
        "sentiment_label": "neutral" if scored else None,
        "intent_label": "spam" if scored else None,
        "toxicity_label": "none" if scored else None,
        "model_name": "moderation" if scored else None,
        "model_version": "1" if scored else None,
        "batch_id": uuid.UUID(int=7) if scored else None,
        "created_at": sent_at,
        "updated_at": datetime(2026, 12, 2, 12, 5, tzinfo=UTC),
    }
