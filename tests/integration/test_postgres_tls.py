"""PostgreSQL over TLS in the local stack (``postgres_tls``), on a cluster of the test's own.

The cluster runs under a temporary state folder on free ports, never the developer's stack,
and is stopped (and its folder removed) when the module ends.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from stack.certificates import ensure_server_certificate
from stack.postgres import APP_DATABASE, APP_ROLE, PostgresServer
from stack.settings import StackSettings
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    """A TLS-only cluster of this module's own, stopped and removed afterwards."""
    state_dir = Path(tempfile.mkdtemp(prefix="modstream-pgtls-it-"))
    state_dir.chmod(0o755)  # the postgres system user must reach its data folder
    (port,) = free_ports(1)
    pg = PostgresServer(StackSettings(state_dir=state_dir, postgres_port=port, postgres_tls=True))
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def _plain_dsn(pg: PostgresServer, role: str = APP_ROLE) -> str:
    return f"postgresql://{role}@127.0.0.1:{pg.settings.postgres_port}/{APP_DATABASE}"


async def test_verify_full_connection_uses_tls(server: PostgresServer) -> None:
    """The stack's DSN (sslmode=verify-full, the stack's CA) connects, and the session is TLS."""
    assert "sslmode=verify-full" in server.dsn
    conn = await asyncpg.connect(server.dsn)
    try:
        used = await conn.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
    finally:
        await conn.close()
    assert used is True


async def test_service_login_connects_with_tls(server: PostgresServer) -> None:
    """stack up created the worker's login, and it connects over verify-full TLS as itself."""
    conn = await asyncpg.connect(server.service_dsns()["worker"])
    try:
        me = await conn.fetchval("SELECT current_user")
        member = await conn.fetchval("SELECT pg_has_role('modstream_worker', 'MEMBER')")
    finally:
        await conn.close()
    assert me == "modstream_worker_login"
    assert member is True


async def test_plaintext_connection_is_refused(server: PostgresServer) -> None:
    """A TCP connection without TLS is rejected by pg_hba (hostnossl ... reject)."""
    with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError, match="no encryption"):
        await asyncpg.connect(_plain_dsn(server) + "?sslmode=disable")


async def test_wrong_ca_fails_verification(server: PostgresServer, tmp_path: Path) -> None:
    """Trusting another CA makes verify-full fail before any query runs."""
    other = ensure_server_certificate(tmp_path / "other", ["localhost"])
    dsn = _plain_dsn(server) + (
        f"?sslmode=verify-full&sslrootcert={quote(str(other.ca_cert), safe='/')}"
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncpg.connect(dsn)
