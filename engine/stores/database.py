"""The PostgreSQL connection pool of the moderating services, and the errors every store raises.

Driver errors are classified by type (:func:`store_failure`): those that mean "Postgres is away"
become :class:`StoreUnavailable` (retried until it returns); everything Postgres or the driver
refuses about the data itself becomes a :class:`StoreError` (the batch is isolated, never
retried forever), a :class:`StoreConflict` when it is a unique constraint. asyncpg raises
some refusals on the client side, before anything reaches the server, as subclasses of its
``InterfaceError`` (which otherwise means a lost connection): those are listed in
:data:`CLIENT_REJECTED_ERRORS` and checked first.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from asyncpg.exceptions import _base as asyncpg_base

from common.settings import PostgresSettings
from engine.errors import EngineError

__all__ = [
    "CLIENT_REJECTED_ERRORS",
    "STORE_DRIVER_ERRORS",
    "UNAVAILABLE_ERRORS",
    "Database",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "keep_session",
    "store_failure",
]


class StoreError(EngineError):
    """Postgres refused an operation (a constraint, a bad value): retrying will not help."""


class StoreConflict(StoreError):
    """A unique constraint refused a row: ``constraint`` names it, so a caller that expects a
    conflict on one constraint (the online claims, ``online.claimed_writes``) can tell it apart."""

    def __init__(self, message: str, constraint: str | None) -> None:
        super().__init__(message)
        self.constraint = constraint


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
    asyncpg.exceptions.InternalClientError,
)
"""Driver errors that mean "Postgres is away": stores turn them into ``StoreUnavailable``
(except the client-side rejections among their subclasses, see ``CLIENT_REJECTED_ERRORS``).
``InternalClientError`` is here because the server going away mid-operation can leave the
protocol's state machine refusing the next step; a fresh connection works."""

CLIENT_REJECTED_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg_base.DataError,
    asyncpg_base.ClientConfigurationError,
    asyncpg_base.UnsupportedClientFeatureError,
    asyncpg_base.UnsupportedServerFeatureError,
    asyncpg.exceptions.DataError,
)
"""Refusals raised by the driver itself about a value or a feature: retrying the same write
gives the same answer, so they are rejections even where they subclass ``InterfaceError``."""

STORE_DRIVER_ERRORS: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, asyncpg.PostgresError)
"""Everything a store write catches and hands to :func:`store_failure`."""


def store_failure(exc: BaseException, action: str) -> StoreError:
    """Classify a driver error by its type: an outage (retry) or a rejection (isolate).

    The message names the action and the error's type or SQLSTATE only: the driver's own text
    can quote the offending value, which may be message text.
    """
    if isinstance(exc, CLIENT_REJECTED_ERRORS):
        return StoreError(f"{action} rejected: {type(exc).__name__}")
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return StoreUnavailable(f"{action} failed: {type(exc).__name__}")
    if isinstance(exc, asyncpg.UniqueViolationError):
        return StoreConflict(f"{action} rejected: {exc.sqlstate}", exc.constraint_name)
    if isinstance(exc, asyncpg.PostgresError):
        return StoreError(f"{action} rejected: {exc.sqlstate}")
    return StoreError(f"{action} rejected: {type(exc).__name__}")


async def keep_session(connection: asyncpg.Connection[Any]) -> None:
    """A pool ``reset`` that sends nothing: for pools whose users never change session state
    (no ``SET``, ``LISTEN``, cursors or advisory locks). asyncpg still rolls back a transaction
    left open before it calls this; the default reset costs a round trip per checkout."""


class Database:
    """One asyncpg pool shared by a service's stores; ``start`` before use, ``stop`` after.

    ``light_reset``: a returned connection is not sent asyncpg's reset query
    (:func:`keep_session`); the online service, whose every call checks a connection out, uses it.
    """

    def __init__(self, settings: PostgresSettings, *, light_reset: bool = False) -> None:
        self._settings = settings
        self._light_reset = light_reset
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
                reset=keep_session if self._light_reset else None,
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
