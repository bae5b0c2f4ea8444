"""Test seams shared by the test suites: a throw-away migrated database, an in-memory publisher."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from pydantic import SecretStr

from admin.migrate import migrate
from common.settings import ServiceSettings
from review.errors import PublishFailedError

__all__ = ["MemoryPublisher", "temporary_database", "with_database"]

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
