"""The worker's PostgreSQL connection pool, and the errors every store raises."""

from __future__ import annotations

from typing import Any, ClassVar

import asyncpg

from common.settings import PostgresSettings

__all__ = ["UNAVAILABLE_ERRORS", "Database", "StoreError", "StoreUnavailable"]


class StoreError(Exception):
    """Postgres refused an operation (a constraint, a bad value): retrying will not help."""

    retriable: ClassVar[bool] = False


class StoreUnavailable(StoreError):
    """Postgres cannot be reached or refused the connection; retry later, nothing is lost."""

    retriable = True


UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
)
"""Driver errors that mean "Postgres is away": stores turn them into ``StoreUnavailable``."""


class Database:
    """One asyncpg pool shared by the worker's stores; ``start`` before use, ``stop`` after."""

    def __init__(self, settings: PostgresSettings) -> None:
        self._settings = settings
        self._pool: asyncpg.Pool[Any] | None = None

    async def start(self) -> None:
        if self._pool is not None:
            return
        try:
            self._pool = await asyncpg.create_pool(
                self._settings.dsn.get_secret_value(),
                min_size=self._settings.min_pool_size,
                max_size=self._settings.max_pool_size,
                command_timeout=self._settings.command_timeout_s,
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"cannot connect: {type(exc).__name__}") from exc

    async def stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> Database:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def pool(self) -> asyncpg.Pool[Any]:
        """The open pool; ``StoreUnavailable`` before ``start`` or after ``stop``."""
        if self._pool is None:
            raise StoreUnavailable("database not started")
        return self._pool
