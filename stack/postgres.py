"""PostgreSQL for the local stack: a throw-away cluster under ``<state_dir>/postgres``.

Debian's server binaries (``/usr/lib/postgresql/<major>/bin``) run as the unprivileged system
user ``postgres`` (PostgreSQL refuses root) through ``setpriv``. The cluster listens on
127.0.0.1 only, at ``postgres_port``, with its unix socket inside the state folder and trust
authentication on loopback and the socket only. Once up it has a role ``modstream`` (a
SUPERUSER: acceptable for a local throw-away cluster, never for production) owning a database
``modstream``, the NOLOGIN group roles of ``migrations/0020_roles.sql`` and one login per
service in them (``modstream_worker_login`` ...), so each service can connect as its own role.

With ``postgres_tls`` the server gets a certificate from a throw-away CA (``stack.certificates``)
and TCP connections without TLS are refused (``hostssl`` only in ``pg_hba.conf``); the TLS
settings live in ``<data>/modstream_tls.conf``, included from ``postgresql.conf``, so turning
the option on or off restarts the server with the other file.
"""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from stack.certificates import ServerCertificate, ensure_server_certificate
from stack.errors import ServiceStartError, ToolMissingError
from stack.service import LocalService
from stack.settings import StackSettings

__all__ = [
    "APP_DATABASE",
    "APP_ROLE",
    "SERVICE_LOGINS",
    "PostgresServer",
    "find_postgres_bin",
    "render_pg_hba",
    "render_postgresql_conf",
    "render_tls_conf",
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
SERVICE_LOGINS: dict[str, str] = {
    "worker": "modstream_worker_login",
    "review": "modstream_review_login",
    "analyst": "modstream_analyst_login",
    "online": "modstream_online_login",
}
"""The stack's login per service, each a member of ``modstream_<service>`` (trust auth: no
password locally; a deployment creates its own logins with passwords or certificates)."""
# The group roles as migrations 0020 and 0040 create them (whichever runs first), then the
# logins.
_CREATE_SERVICE_ROLES = """
DO $$
DECLARE
    g text;
BEGIN
    FOREACH g IN ARRAY ARRAY['owner', 'worker', 'review', 'analyst', 'online'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'modstream_' || g) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', 'modstream_' || g);
        END IF;
        IF g <> 'owner' AND NOT EXISTS (
                SELECT FROM pg_roles WHERE rolname = 'modstream_' || g || '_login') THEN
            EXECUTE format('CREATE ROLE %I LOGIN IN ROLE %I', 'modstream_' || g || '_login',
                           'modstream_' || g);
        END IF;
    END LOOP;
END;
$$"""
_TLS_CONF = "modstream_tls.conf"
_TLS_INCLUDE = f"include_if_exists = '{_TLS_CONF}'"
_TLS_HOSTS = ("localhost", "127.0.0.1")


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


def render_pg_hba(tls: bool = False) -> str:
    """Trust on the unix socket and loopback addresses, nothing else; with ``tls`` a loopback
    TCP connection must use TLS, and any connection without it is rejected."""
    if not tls:
        return "\n".join(
            [
                "# modstream local stack: trust on loopback and the socket only.",
                "local   all   all                 trust",
                "host    all   all   127.0.0.1/32  trust",
                "host    all   all   ::1/128       trust",
                "",
            ]
        )
    return "\n".join(
        [
            "# modstream local stack: trust on the socket, TLS required on loopback TCP.",
            "local      all   all                 trust",
            "hostssl    all   all   127.0.0.1/32  trust",
            "hostssl    all   all   ::1/128       trust",
            "hostnossl  all   all   all           reject",
            "",
        ]
    )


def render_tls_conf(certificate: ServerCertificate | None) -> str:
    """The included TLS settings: the server's certificate and key, or TLS off."""
    if certificate is None:
        return "# modstream local stack: TLS off (StackSettings.postgres_tls)\nssl = off\n"
    return "\n".join(
        [
            "# modstream local stack: TLS on (StackSettings.postgres_tls)",
            "ssl = on",
            f"ssl_cert_file = '{certificate.cert}'",
            f"ssl_key_file = '{certificate.key}'",
            "ssl_min_protocol_version = 'TLSv1.2'",
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
        self.tls_dir = self.directory / "tls"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.settings.postgres_port}"

    @property
    def ca_cert(self) -> Path | None:
        """The certificate clients trust (``sslrootcert``) when TLS is on."""
        return self.tls_dir / "ca.pem" if self.settings.postgres_tls else None

    def login_dsn(self, role: str, database: str = APP_DATABASE) -> str:
        """The connection string of ``role`` (verifying the server's certificate with TLS)."""
        dsn = f"postgresql://{role}@127.0.0.1:{self.settings.postgres_port}/{database}"
        if self.ca_cert is None:
            return dsn
        return f"{dsn}?sslmode=verify-full&sslrootcert={quote(str(self.ca_cert), safe='/')}"

    @property
    def dsn(self) -> str:
        """The superuser's connection string (migrations, tests, the demo)."""
        return self.login_dsn(APP_ROLE)

    def service_dsns(self) -> dict[str, str]:
        """Each service's own connection string (``MODSTREAM_POSTGRES__DSN`` of that service)."""
        return {service: self.login_dsn(login) for service, login in SERVICE_LOGINS.items()}

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
        else:
            self._set_port()
        self._configure_tls()
        self._chown(self.directory)

    def _tls_conf(self) -> str:
        """What ``modstream_tls.conf`` should hold (makes the certificates when TLS is on)."""
        if not self.settings.postgres_tls:
            return render_tls_conf(None)
        return render_tls_conf(ensure_server_certificate(self.tls_dir, _TLS_HOSTS))

    def _configure_tls(self) -> None:
        """Write the TLS include and ``pg_hba.conf`` for the current ``postgres_tls``."""
        (self.data_dir / _TLS_CONF).write_text(self._tls_conf(), encoding="utf-8")
        conf_path = self.data_dir / "postgresql.conf"
        text = conf_path.read_text(encoding="utf-8")
        if _TLS_INCLUDE not in text.splitlines():
            conf_path.write_text(f"{text.rstrip()}\n{_TLS_INCLUDE}\n", encoding="utf-8")
        hba = render_pg_hba(self.settings.postgres_tls)
        (self.data_dir / "pg_hba.conf").write_text(hba, encoding="utf-8")

    def is_outdated(self, pid: int) -> bool:
        """Running with TLS while ``postgres_tls`` is off, or the reverse."""
        current = self.data_dir / _TLS_CONF
        running_tls = current.is_file() and "ssl = on" in current.read_text(encoding="utf-8")
        return running_tls != self.settings.postgres_tls

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
        """Create the ``modstream`` role and database, the group roles and the service logins
        unless they exist."""
        if self._psql("postgres", _ROLE_EXISTS) != "1":
            self._psql("postgres", _CREATE_ROLE)
        if self._psql("postgres", _DATABASE_EXISTS) != "1":
            self._psql("postgres", _CREATE_DATABASE)
        self._psql("postgres", _CREATE_SERVICE_ROLES)
