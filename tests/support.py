"""Test seams shared by the test suites: a throw-away migrated database, an in-memory sink."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from pydantic import SecretStr

from admin.migrate import migrate
from common.settings import ServiceSettings
from review.errors import PublishFailedError

__all__ = ["MemorySink", "temporary_database", "with_database"]

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


class MemorySink:
    """A decision sink that keeps records in a list; ``failing`` makes it refuse them."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []
        self.failing = False

    async def send(self, key: bytes, value: bytes) -> None:
        if self.failing:
            raise PublishFailedError("memory sink set to fail")
        self.records.append((key, value))
