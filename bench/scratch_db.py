"""A throw-away, migrated database on the stack's PostgreSQL server, for benchmarks.

``scratch_database`` creates ``<prefix>_<random>``, applies every migration (as ``modstream
migrate`` does), yields its DSN, and drops it afterwards (also when the bench fails or is
interrupted), so a benchmark's millions of rows never stay on the disk.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from admin.migrate import apply_migrations, discover
from common.settings import project_root

__all__ = ["dsn_for", "scratch_database"]


def dsn_for(dsn: str, *, database: str | None = None, user: str | None = None) -> str:
    """``dsn`` pointing at another database and/or connecting as another login."""
    parts = urlsplit(dsn)
    if database is not None:
        parts = parts._replace(path="/" + database)
    if user is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{user}@{host}")
    return urlunsplit(parts)


@asynccontextmanager
async def scratch_database(
    admin_dsn: str, prefix: str, *, up_to: int | None = None, keep: bool = False
) -> AsyncIterator[str]:
    """Create and migrate a fresh database (migrations up to version ``up_to``, or all); yield
    its DSN (same login); drop it at the end, unless ``keep`` (then say so: it is yours to drop)."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    dsn = dsn_for(admin_dsn, database=name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            migrations = discover(project_root() / "migrations")
            wanted = [m for m in migrations if up_to is None or m.version <= up_to]
            await apply_migrations(conn, wanted)
        finally:
            await conn.close()
        yield dsn
    finally:
        if keep:
            print(f'kept database {name}: DROP DATABASE "{name}" when done')
        else:
            admin = await asyncpg.connect(admin_dsn)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.close()
