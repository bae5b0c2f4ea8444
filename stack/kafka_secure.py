"""The local broker's optional SASL_SSL listener (``MODSTREAM_STACK__KAFKA_SECURE=true``).

Beside the unchanged PLAINTEXT listener the broker then serves ``SASL_SSL`` on
``kafka_secure_port``: TLS with a broker certificate for 127.0.0.1/localhost signed by a
throw-away CA, and SCRAM-SHA-512 logins. Everything lives under ``<state_dir>/kafka/secure``:

- ``ca.pem`` (what clients trust), ``ca.key``, ``broker.pem``/``broker.key`` and
  ``broker-keystore.pem`` (key + certificate, Kafka's ``PEM`` key store), made once;
- ``client.env`` (mode 0600): the ``MODSTREAM_KAFKA__*`` lines a client needs (address, protocol,
  mechanism, user, generated password, CA file), made once and kept across restarts.

The SCRAM user is registered with Kafka's own ``kafka.admin.ConfigCommand`` over the plaintext
listener once the broker answers (the password travels in a 0600 file, not on a command line).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from common.settings import KafkaSettings
from stack.certificates import CertificateAuthority, issue_certificate, make_authority
from stack.errors import ServiceStartError
from stack.settings import StackSettings

__all__ = [
    "SCRAM_MECHANISM",
    "SCRAM_USERNAME",
    "SecureListener",
    "secure_kafka_settings",
]

SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_USERNAME = "modstream"
_SCRAM_ITERATIONS = 8192
_CONFIG_TIMEOUT_S = 120.0
_ENV_PREFIX = "MODSTREAM_KAFKA__"


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600 from creation on)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    path.chmod(0o600)


@dataclass(frozen=True, slots=True)
class SecureListener:
    """Files and settings of the SASL_SSL listener of one stack."""

    settings: StackSettings

    @property
    def directory(self) -> Path:
        return self.settings.state_dir / "kafka" / "secure"

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker-keystore.pem"

    @property
    def credentials_path(self) -> Path:
        return self.directory / "client.env"

    @property
    def scram_marker(self) -> Path:
        return self.directory / ".scram-user.sha256"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.settings.kafka_secure_port}"

    def server_properties(self) -> list[str]:
        """The ``server.properties`` lines of the listener (appended to the plaintext ones)."""
        prefix = "listener.name.sasl_ssl"
        return [
            f"sasl.enabled.mechanisms={SCRAM_MECHANISM}",
            f"{prefix}.sasl.enabled.mechanisms={SCRAM_MECHANISM}",
            f"{prefix}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            f"{prefix}.ssl.keystore.type=PEM",
            f"{prefix}.ssl.keystore.location={self.keystore}",
            f"{prefix}.ssl.client.auth=none",
        ]

    def ensure_certificates(self) -> None:
        """Make the CA and the broker's key store unless they exist."""
        if self.keystore.is_file() and self.ca_cert.is_file():
            return
        authority: CertificateAuthority = make_authority(self.directory)
        broker = issue_certificate(authority, self.directory, "broker")
        _write_private(
            self.keystore,
            broker.key.read_text(encoding="ascii") + broker.cert.read_text(encoding="ascii"),
        )

    def password(self) -> SecretStr:
        """The SCRAM password of ``client.env``, generated (and the file written) on first use."""
        if self.credentials_path.is_file():
            values = _read_env_file(self.credentials_path)
            stored = values.get(f"{_ENV_PREFIX}SASL_PASSWORD")
            if stored:
                self._write_credentials(SecretStr(stored))  # refresh address and CA lines
                return SecretStr(stored)
        password = SecretStr(secrets.token_urlsafe(24))
        self._write_credentials(password)
        return password

    def _write_credentials(self, password: SecretStr) -> None:
        lines = [
            "# modstream local stack: SASL_SSL client settings (`set -a; . this-file`).",
            f"{_ENV_PREFIX}BOOTSTRAP_SERVERS={self.endpoint}",
            f"{_ENV_PREFIX}SECURITY_PROTOCOL=SASL_SSL",
            f"{_ENV_PREFIX}SASL_MECHANISM={SCRAM_MECHANISM}",
            f"{_ENV_PREFIX}SASL_USERNAME={SCRAM_USERNAME}",
            f"{_ENV_PREFIX}SASL_PASSWORD={password.get_secret_value()}",
            f"{_ENV_PREFIX}SSL_CAFILE={self.ca_cert}",
            "",
        ]
        _write_private(self.credentials_path, "\n".join(lines))

    def client_environment(self) -> dict[str, str]:
        """The ``MODSTREAM_KAFKA__*`` variables of ``client.env`` (for a worker process)."""
        if not self.credentials_path.is_file():
            raise ServiceStartError(
                f"{self.credentials_path} does not exist: start the stack with "
                "MODSTREAM_STACK__KAFKA_SECURE=true first"
            )
        return _read_env_file(self.credentials_path)

    def prepare(self) -> None:
        """Certificates and credentials, before the broker starts (cheap once made)."""
        self.ensure_certificates()
        self.password()

    def ensure_scram_user(self, java_argv: Sequence[str], plaintext_bootstrap: str) -> bool:
        """Register the SCRAM user with ``kafka.admin.ConfigCommand`` unless this password was
        registered already; ``java_argv`` is the JVM command line up to the main class."""
        password = self.password()
        digest = hashlib.sha256(
            f"{SCRAM_USERNAME}\0{password.get_secret_value()}".encode()
        ).hexdigest()
        if self.scram_marker.is_file() and self.scram_marker.read_text().strip() == digest:
            return False
        config_file = self.directory / "scram-user.properties"
        _write_private(
            config_file,
            # In a file the value has no brackets (``--add-config`` syntax needs them); the
            # password is URL-safe base64, so it holds no comma.
            f"{SCRAM_MECHANISM}=iterations={_SCRAM_ITERATIONS},"
            f"password={password.get_secret_value()}\n",
        )
        argv = [
            *java_argv, "kafka.admin.ConfigCommand",
            "--bootstrap-server", plaintext_bootstrap,
            "--alter", "--entity-type", "users", "--entity-name", SCRAM_USERNAME,
            "--add-config-file", str(config_file),
        ]  # fmt: skip
        try:
            result = subprocess.run(
                argv, capture_output=True, text=True, timeout=_CONFIG_TIMEOUT_S, check=False
            )
        finally:
            config_file.unlink(missing_ok=True)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr)[-2000:].replace(password.get_secret_value(), "*")
            raise ServiceStartError(f"could not create the SCRAM user {SCRAM_USERNAME}:\n{tail}")
        _write_private(self.scram_marker, digest + "\n")
        return True


def _read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def secure_kafka_settings(stack: StackSettings, base: KafkaSettings) -> KafkaSettings:
    """``base`` (topics, group) pointed at the stack's SASL_SSL listener with its credentials.

    Raises ``ServiceStartError`` when the listener's credentials were never made
    (``modstream stack up`` with ``MODSTREAM_STACK__KAFKA_SECURE=true`` first).
    """
    values = SecureListener(stack).client_environment()
    fields = {
        name.removeprefix(_ENV_PREFIX).lower(): value
        for name, value in values.items()
        if name.startswith(_ENV_PREFIX)
    }
    merged = {**base.model_dump(), **fields}
    return KafkaSettings.model_validate(merged)
