"""PostgreSQL for the local stack: a throw-away cluster under ``<state_dir>/postgres``.

Debian's server binaries (``/usr/lib/postgresql/<major>/bin``) run as the unprivileged system
user ``postgres`` (PostgreSQL refuses root) through ``setpriv``. The cluster listens on
127.0.0.1 only, at ``postgres_port``, with its unix socket inside the state folder and trust
authentication on loopback and the socket only. Once up it has a role ``modstream`` (a
SUPERUSER: acceptable for a local throw-away cluster, never for production) owning a database
``modstream``.
"""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from stack.errors import ServiceStartError, ToolMissingError
from stack.service import LocalService
from stack.settings import StackSettings

__all__ = [
    "APP_DATABASE",
    "APP_ROLE",
    "PostgresServer",
    "find_postgres_bin",
    "render_pg_hba",
    "render_postgresql_conf",
]

APP_ROLE = "modstream"
APP_DATABASE = "modstream"
SYSTEM_USER = "postgres"
_DEBIAN_ROOT = Path("/usr/lib/postgresql")
_TOOL_TIMEOUT_S = 120.0
# Fixed statements (no input reaches them), so plain strings are safe here.
_ROLE_EXISTS = "SELECT 1 FROM pg_roles WHERE rolname = 'modstream'"
_CREATE_ROLE = "CREATE ROLE modstream LOGIN SUPERUSER"
_DATABASE_EXISTS = "SELECT 1 FROM pg_database WHERE datname = 'modstream'"
_CREATE_DATABASE = "CREATE DATABASE modstream OWNER modstream"


def find_postgres_bin(root: Path = _DEBIAN_ROOT) -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` holding ``initdb``."""
    candidates = [p.parent for p in root.glob("*/bin/initdb") if p.parent.parent.name.isdigit()]
    if not candidates:
        raise ToolMissingError(
            f"no initdb under {root}/*/bin; run scripts/bootstrap.sh (apt-get install postgresql)"
        )
    return max(candidates, key=lambda p: int(p.parent.name))


def render_postgresql_conf(port: int, socket_dir: Path) -> str:
    """Settings appended to the generated ``postgresql.conf`` (later lines win)."""
    return "\n".join(
        [
            "",
            "# --- modstream local stack ---",
            "listen_addresses = '127.0.0.1'",
            f"port = {port}",
            f"unix_socket_directories = '{socket_dir}'",
            "shared_buffers = 64MB",
            "fsync = off  # throw-away cluster: an OS crash may lose it, a process kill cannot",
            "logging_collector = off",
            "",
        ]
    )


def render_pg_hba() -> str:
    """Trust on the unix socket and loopback addresses, nothing else."""
    return "\n".join(
        [
            "# modstream local stack: trust on loopback and the socket only.",
            "local   all   all                 trust",
            "host    all   all   127.0.0.1/32  trust",
            "host    all   all   ::1/128       trust",
            "",
        ]
    )


class PostgresServer(LocalService):
    """The PostgreSQL cluster of the local stack."""

    name = "postgres"
    stop_signal = signal.SIGINT  # "fast" shutdown: SIGTERM would wait for clients to leave
    start_timeout_s = 60.0

    def __init__(self, settings: StackSettings) -> None:
        super().__init__(settings)
        self.data_dir = self.directory / "data"
        self.socket_dir = self.directory / "run"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.settings.postgres_port}"

    @property
    def dsn(self) -> str:
        """The application's connection string."""
        return f"postgresql://{APP_ROLE}@127.0.0.1:{self.settings.postgres_port}/{APP_DATABASE}"

    @property
    def log_path(self) -> Path:
        return self.directory / "postgres.log"

    @property
    def marker(self) -> str:
        return str(self.data_dir)

    def ports(self) -> tuple[int, ...]:
        return (self.settings.postgres_port,)

    def _user(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(SYSTEM_USER)
        except KeyError as exc:
            raise ToolMissingError(
                f"system user {SYSTEM_USER!r} missing; run scripts/bootstrap.sh"
            ) from exc

    def _as_postgres(self, argv: Sequence[str]) -> list[str]:
        if os.geteuid() != 0:
            return list(argv)  # already unprivileged: run as ourselves
        user = self._user()
        return [
            "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
            *argv,
        ]  # fmt: skip

    def _chown(self, path: Path) -> None:
        if os.geteuid() != 0:
            return
        user = self._user()
        for folder, _dirs, files in os.walk(path):
            os.chown(folder, user.pw_uid, user.pw_gid)
            for name in files:
                os.chown(Path(folder) / name, user.pw_uid, user.pw_gid)

    def prepare(self) -> None:
        bin_dir = find_postgres_bin()
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.touch()
        if not (self.data_dir / "PG_VERSION").is_file():
            if self.data_dir.exists() and any(self.data_dir.iterdir()):
                raise ServiceStartError(
                    f"{self.data_dir} holds files but no cluster; remove it and run up again"
                )
            self.data_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
            self._chown(self.directory)
            argv = self._as_postgres(
                [
                    str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SYSTEM_USER,
                    "-E", "UTF8", "--no-locale", "--auth-local=trust", "--auth-host=trust",
                ]
            )  # fmt: skip
            result = subprocess.run(
                argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
            )
            if result.returncode != 0:
                tail = (result.stdout + result.stderr)[-2000:]
                raise ServiceStartError(f"initdb failed:\n{tail}")
            with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
                conf.write(render_postgresql_conf(self.settings.postgres_port, self.socket_dir))
            (self.data_dir / "pg_hba.conf").write_text(render_pg_hba(), encoding="utf-8")
        else:
            self._set_port()
        self._chown(self.directory)

    def _set_port(self) -> None:
        """Rewrite the port line so a changed ``postgres_port`` takes effect on restart."""
        conf_path = self.data_dir / "postgresql.conf"
        text = conf_path.read_text(encoding="utf-8")
        updated = re.sub(r"(?m)^port = \d+$", f"port = {self.settings.postgres_port}", text)
        if updated != text:
            conf_path.write_text(updated, encoding="utf-8")

    def command(self) -> tuple[Sequence[str], Mapping[str, str] | None]:
        postgres = str(find_postgres_bin() / "postgres")
        return self._as_postgres([postgres, "-D", str(self.data_dir)]), None

    def healthy(self) -> bool:
        try:
            result = subprocess.run(
                ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.settings.postgres_port),
                 "-t", "2"],
                capture_output=True, timeout=5.0, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0

    def _psql(self, database: str, sql: str) -> str:
        argv = [
            "psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
            "-h", "127.0.0.1", "-p", str(self.settings.postgres_port),
            "-U", SYSTEM_USER, "-d", database, "-c", sql,
        ]  # fmt: skip
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
        if result.returncode != 0:
            raise ServiceStartError(f"psql failed: {result.stderr.strip()[-1000:]}")
        return result.stdout.strip()

    def after_healthy(self) -> None:
        """Create the ``modstream`` role and database unless they exist."""
        if self._psql("postgres", _ROLE_EXISTS) != "1":
            self._psql("postgres", _CREATE_ROLE)
        if self._psql("postgres", _DATABASE_EXISTS) != "1":
            self._psql("postgres", _CREATE_DATABASE)
