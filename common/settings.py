"""The settings base every program builds its own settings object on.

Every field can be set from the environment with the ``MODSTREAM_`` prefix and ``__`` between
section and field, e.g. ``MODSTREAM_KAFKA__BOOTSTRAP_SERVERS=kafka:9092`` or
``MODSTREAM_POSTGRES__DSN=...``. Each program (``worker.settings.WorkerSettings``,
``review.settings.ReviewServiceSettings``, ``stack.settings.StackToolSettings``) extends
:class:`ServiceSettings` with the sections it alone reads; it is loaded once at the program's
entry point, and components receive their own section and never read the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "KafkaSettings",
    "PostgresSettings",
    "Section",
    "ServiceSettings",
    "project_root",
]


def project_root() -> Path:
    """The checkout this package runs from (holds ``migrations/`` and ``model_repository/``)."""
    return Path(__file__).resolve().parent.parent


class Section(BaseModel):
    """One frozen settings section; unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(Section):
    bootstrap_servers: str = "127.0.0.1:19092"
    input_topic: str = "chat.messages"
    dlq_topic: str = "chat.messages.dlq"
    verdict_topic: str = "moderation.verdicts"
    decision_topic: str = "moderation.decisions"
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
