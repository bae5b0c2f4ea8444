"""docker-compose's database set-up, for real: deploy/compose/postgres-roles.sh on an empty
cluster (as the postgres image runs it on first start), the migrations as the migrator login
(no superuser), then each service's login can do its own work and not another's.

The cluster is the test's own (Debian's PostgreSQL under a temporary folder, free port), with
nothing but the ``modstream`` database in it, like the image's ``POSTGRES_DB``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from admin.migrate import apply_migrations, discover
from common.settings import project_root
from stack.postgres import APP_DATABASE, SYSTEM_USER, PostgresServer, find_postgres_bin
from stack.settings import StackSettings
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration

ROLES_SCRIPT = project_root() / "deploy" / "compose" / "postgres-roles.sh"


class _EmptyCluster(PostgresServer):
    """A cluster holding only its superuser and the ``modstream`` database."""

    def after_healthy(self) -> None:
        if self._psql("postgres", "SELECT 1 FROM pg_database WHERE datname = 'modstream'") != "1":
            self._psql("postgres", f"CREATE DATABASE {APP_DATABASE}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[int]:
    """The cluster's port, after postgres-roles.sh ran in it as the image would run it."""
    state_dir = Path(tempfile.mkdtemp(prefix="modstream-compose-roles-"))
    state_dir.chmod(0o755)  # the postgres system user must reach its data folder
    (port,) = free_ports(1)
    server = _EmptyCluster(StackSettings(state_dir=state_dir, postgres_port=port))
    try:
        server.start()
        env = {
            **os.environ,
            "PATH": f"{find_postgres_bin()}:{os.environ['PATH']}",
            "PGHOST": "127.0.0.1",
            "PGPORT": str(port),
            "POSTGRES_USER": SYSTEM_USER,
            "POSTGRES_DB": APP_DATABASE,
            "MODSTREAM_MIGRATOR_PASSWORD": "m",
            "MODSTREAM_WORKER_PASSWORD": "w",
            "MODSTREAM_REVIEW_PASSWORD": "r",
            "MODSTREAM_ONLINE_PASSWORD": "o",
        }
        done = subprocess.run(
            ["bash", str(ROLES_SCRIPT)], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        yield port
    finally:
        server.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def _dsn(port: int, login: str) -> str:
    return f"postgresql://{login}@127.0.0.1:{port}/{APP_DATABASE}"


async def test_the_migrator_applies_every_migration_without_being_a_superuser(
    cluster: int,
) -> None:
    """The migrator is no superuser, yet every migration applies, and afterwards the tables
    belong to modstream_owner."""
    conn = await asyncpg.connect(_dsn(cluster, "modstream_migrator"))
    try:
        assert (
            await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            is False
        )
        applied = await apply_migrations(conn, discover(project_root() / "migrations"))
        assert applied == [m.version for m in discover(project_root() / "migrations")]
        owner = await conn.fetchval(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'verdicts'"
        )
    finally:
        await conn.close()
    assert owner == "modstream_owner"


async def test_each_login_does_its_own_work_and_not_anothers(cluster: int) -> None:
    """After the migrations: the worker login reads offsets but may not delete verdicts; the
    review login may not write offsets; the online login is a worker by membership."""
    worker = await asyncpg.connect(_dsn(cluster, "modstream_worker_login"))
    review = await asyncpg.connect(_dsn(cluster, "modstream_review_login"))
    online = await asyncpg.connect(_dsn(cluster, "modstream_online_login"))
    try:
        assert await worker.fetchval("SELECT count(*) FROM consumer_offsets") == 0
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await worker.execute("DELETE FROM verdicts")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await review.execute(
                "INSERT INTO consumer_offsets (consumer_group, topic, partition, next_offset)"
                " VALUES ('g', 't', 0, 1)"
            )
        assert await online.fetchval("SELECT pg_has_role('modstream_worker', 'MEMBER')") is True
        assert await online.fetchval("SELECT count(*) FROM online_messages") == 0
    finally:
        for conn in (worker, review, online):
            await conn.close()
