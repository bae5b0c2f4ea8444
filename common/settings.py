"""The settings base every program builds its own settings object on.

Every field can be set from the environment with the ``MODSTREAM_`` prefix and ``__`` between
section and field, e.g. ``MODSTREAM_KAFKA__BOOTSTRAP_SERVERS=kafka:9092`` or
``MODSTREAM_POSTGRES__DSN=...``. Each program (``engine.settings.WorkerSettings``,
``review.settings.ReviewServiceSettings``, ``stack.settings.StackToolSettings``) extends
:class:`ServiceSettings` with the sections it alone reads; it is loaded once at the program's
entry point, and components receive their own section and never read the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "KafkaSettings",
    "PostgresSettings",
    "SaslMechanism",
    "Section",
    "SecurityProtocol",
    "ServiceSettings",
    "project_root",
]


def project_root() -> Path:
    """The checkout this package runs from (holds ``migrations/`` and ``model_repository/``)."""
    return Path(__file__).resolve().parent.parent


class Section(BaseModel):
    """One frozen settings section; unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
"""How every Kafka client talks to the brokers (Kafka's ``security.protocol`` values)."""

SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
"""The SASL mechanisms the clients support (Kerberos/GSSAPI is not offered)."""

_TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
_SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class KafkaSettings(Section):
    """Where the Kafka brokers are, how to authenticate to them, and the topic names.

    Security (the same for every client: consumer, producers, admin): ``security_protocol``
    picks TLS and/or SASL. With ``SASL_*`` a ``sasl_mechanism`` is required; ``PLAIN`` and
    ``SCRAM-*`` need ``sasl_username`` and ``sasl_password``; ``OAUTHBEARER`` needs
    ``sasl_oauth_token_provider``, the ``"package.module:attribute"`` import path of an aiokafka
    ``AbstractTokenProvider`` subclass (instantiated without arguments) or instance, imported
    when a client is built. With ``SSL``/``SASL_SSL`` the brokers are verified against
    ``ssl_cafile`` (the system's CAs when unset); ``ssl_certfile``/``ssl_keyfile`` add a client
    certificate (mTLS). Every file named must exist when the settings load.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)
    """Errors never echo the input: it may hold ``sasl_password`` or ``ssl_key_password``."""

    bootstrap_servers: str = "127.0.0.1:19092"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_oauth_token_provider: str | None = None
    """``"package.module:attribute"`` of an aiokafka ``AbstractTokenProvider`` (OAUTHBEARER)."""
    ssl_cafile: Path | None = None
    """PEM bundle of the CAs that sign the brokers' certificates; unset: the system's CAs."""
    ssl_certfile: Path | None = None
    """PEM client certificate (chain) for mTLS; may also hold the key."""
    ssl_keyfile: Path | None = None
    """PEM private key of ``ssl_certfile`` when it is not in that file."""
    ssl_key_password: SecretStr | None = None
    """Password of an encrypted ``ssl_keyfile``."""
    ssl_check_hostname: bool = True
    """Verify that the broker certificate names the host connected to (keep on in production)."""
    input_topic: str = "chat.messages"
    dlq_topic: str = "chat.messages.dlq"
    verdict_topic: str = "moderation.verdicts"
    decision_topic: str = "moderation.decisions"
    appeal_topic: str = "moderation.appeals"
    """Appeals a platform files over Kafka (read by the review service)."""
    appeal_dlq_topic: str = "moderation.appeals.dlq"
    """Appeal records the review service cannot take, with the reason in their headers."""
    group_id: str = "modstream"
    group_instance_id: str | None = None
    """Static membership: a restart within the session timeout does not rebalance."""
    session_timeout_ms: int = 30_000
    rebalance_timeout_ms: int = 120_000
    """Must exceed the worst-case batch flush (max_wait_s + inference deadline + database write)."""
    max_poll_records: int = 500
    fetch_max_bytes: int = 52_428_800
    max_message_bytes: int = 1_048_576
    """Records larger than this are dead-lettered without being decoded."""

    @model_validator(mode="after")
    def _check_security(self) -> Self:
        problems = _security_problems(self)
        if problems:
            raise ValueError("invalid Kafka security settings: " + "; ".join(problems))
        return self


def _security_problems(kafka: KafkaSettings) -> list[str]:
    """Every inconsistency of ``kafka``'s security fields, each as one readable sentence."""
    protocol = kafka.security_protocol
    problems: list[str] = []
    if protocol in _SASL_PROTOCOLS:
        mechanism = kafka.sasl_mechanism
        if mechanism is None:
            problems.append(f"security_protocol {protocol} needs sasl_mechanism")
        elif mechanism == "OAUTHBEARER":
            provider = kafka.sasl_oauth_token_provider
            if provider is None:
                problems.append("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider")
            elif not _is_import_path(provider):
                problems.append(
                    "sasl_oauth_token_provider must look like 'package.module:attribute'"
                )
        else:
            if not kafka.sasl_username:
                problems.append(f"sasl_mechanism {mechanism} needs sasl_username")
            if kafka.sasl_password is None or not kafka.sasl_password.get_secret_value():
                problems.append(f"sasl_mechanism {mechanism} needs sasl_password")
    else:
        sasl_fields = ("sasl_mechanism", "sasl_username", "sasl_password")
        for name in (*sasl_fields, "sasl_oauth_token_provider"):
            if getattr(kafka, name) is not None:
                problems.append(f"{name} is set but security_protocol {protocol} uses no SASL")
    files = {
        "ssl_cafile": kafka.ssl_cafile,
        "ssl_certfile": kafka.ssl_certfile,
        "ssl_keyfile": kafka.ssl_keyfile,
    }
    if protocol in _TLS_PROTOCOLS:
        for name, path in files.items():
            if path is not None and not path.is_file():
                problems.append(f"{name} {path} does not exist or is not a file")
        if kafka.ssl_keyfile is not None and kafka.ssl_certfile is None:
            problems.append("ssl_keyfile is set without ssl_certfile")
        if kafka.ssl_key_password is not None and kafka.ssl_certfile is None:
            problems.append("ssl_key_password is set without ssl_certfile")
    else:
        for name, path in files.items():
            if path is not None:
                problems.append(f"{name} is set but security_protocol {protocol} uses no TLS")
    return problems


def _is_import_path(text: str) -> bool:
    module, colon, attribute = text.partition(":")
    return bool(colon) and all(part.isidentifier() for part in (*module.split("."), attribute))


class PostgresSettings(Section):
    dsn: SecretStr = SecretStr("postgresql://modstream@127.0.0.1:15432/modstream")
    min_pool_size: int = 1
    max_pool_size: int = 4
    command_timeout_s: float = 30.0


class ServiceSettings(BaseSettings):
    """The sections every program reads: Kafka, PostgreSQL and the log level."""

    model_config = SettingsConfigDict(
        env_prefix="MODSTREAM_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )

    kafka: KafkaSettings = KafkaSettings()
    postgres: PostgresSettings = PostgresSettings()
    log_level: str = "info"
