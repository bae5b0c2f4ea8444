"""``modstream migrate``: apply ``migrations/NNNN_name.sql`` in order, exactly once.

Safe when several workers start at once: a session-level advisory lock serialises runs, each
migration applies in its own transaction, and ``schema_migrations`` records the version with a
checksum so an edited, already-applied file is reported instead of silently diverging.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from admin.errors import AdminError
from common.logs import configure_logging, get_logger
from common.settings import ServiceSettings, project_root

__all__ = ["Migration", "MigrationError", "apply_migrations", "discover", "register"]

_ADVISORY_LOCK_KEY = 0x6D6F6473  # "mods": one well-known key for every modstream migrator
_FILE_PATTERN = re.compile(r"^(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql$")
_log = get_logger(__name__)


class MigrationError(AdminError, RuntimeError):
    """The migrations folder or the database's migration history is inconsistent."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(folder: Path) -> list[Migration]:
    """Every ``NNNN_name.sql`` in ``folder``, ordered; other files are an error, not ignored."""
    migrations: list[Migration] = []
    for path in sorted(folder.iterdir()):
        if path.suffix != ".sql":
            continue
        match = _FILE_PATTERN.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: expected NNNN_lowercase_name.sql")
        migrations.append(
            Migration(int(match["version"]), match["name"], path.read_text(encoding="utf-8"))
        )
    versions = [m.version for m in migrations]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {folder}")
    return migrations


async def apply_migrations(conn: asyncpg.Connection[Any], migrations: list[Migration]) -> list[int]:
    """Apply what is missing; return the versions applied now."""
    await conn.execute("SELECT pg_advisory_lock($1)", _ADVISORY_LOCK_KEY)
    try:
        await conn.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    integer     PRIMARY KEY,
                name       text        NOT NULL,
                checksum   text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        applied = {row["version"]: row["checksum"] for row in rows}
        done: list[int] = []
        for migration in migrations:
            recorded = applied.get(migration.version)
            if recorded is not None:
                if recorded != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.version:04d}_{migration.name} was edited after "
                        "being applied; add a new migration instead"
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            _log.info("migration_applied", version=migration.version, name=migration.name)
            done.append(migration.version)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _ADVISORY_LOCK_KEY)


async def migrate(settings: ServiceSettings, folder: Path | None = None) -> list[int]:
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        return await apply_migrations(conn, discover(folder or project_root() / "migrations"))
    finally:
        await conn.close()


def _run(args: argparse.Namespace) -> int:
    settings = ServiceSettings()
    configure_logging(settings.log_level)
    applied = asyncio.run(migrate(settings))
    print(f"migrations applied: {len(applied)}" + (f" ({applied})" if applied else ""))
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("migrate", help="apply database migrations (idempotent)")
    parser.set_defaults(handler=_run)
