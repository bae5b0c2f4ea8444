"""One typed, frozen settings object, loaded once at the entry point.

Every field can be set from the environment with the ``MODSTREAM_`` prefix and ``__`` between
section and field, e.g. ``MODSTREAM_BATCH__MAX_ITEMS=50`` or ``MODSTREAM_POSTGRES__DSN=...``.
Components receive their own section and never read the environment themselves.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipelines.policy import PolicyThresholds

__all__ = [
    "BatchSettings",
    "HttpSettings",
    "KafkaSettings",
    "PostgresSettings",
    "ReliabilitySettings",
    "ReviewSettings",
    "RulesSettings",
    "Settings",
    "StackSettings",
    "TritonSettings",
    "project_root",
]


def project_root() -> Path:
    """The checkout this package runs from (holds ``migrations/`` and ``model_repository/``)."""
    return Path(__file__).resolve().parent.parent


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Section):
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


class PostgresSettings(_Section):
    dsn: SecretStr = SecretStr("postgresql://modstream@127.0.0.1:15432/modstream")
    min_pool_size: int = 1
    max_pool_size: int = 4
    command_timeout_s: float = 30.0


class TritonSettings(_Section):
    grpc_url: str = "127.0.0.1:18001"
    model_name: str = "moderation"
    model_version: str = ""
    """Empty means the version policy's latest; set to pin, e.g. ``"1"``."""
    request_timeout_s: float = 30.0
    """Deadline of one inference call."""
    max_attempts: int = 4
    retry_budget_ratio: float = 0.2
    """Retries allowed as a fraction of recent calls, so retries cannot multiply an outage."""
    backoff_base_s: float = 0.1
    backoff_max_s: float = 2.0
    ready_timeout_s: float = 120.0
    """How long start-up waits for the server and the model to report ready."""
    breaker_failure_threshold: int = 5
    breaker_reset_s: float = 10.0


class BatchSettings(_Section):
    max_items: int = Field(default=100, ge=1)
    max_wait_s: float = Field(default=5.0, gt=0)
    max_in_flight: int = Field(default=4, ge=1)
    """Batches being inferred or written at once; bounds memory and overlaps the stages."""
    drain_timeout_s: float = 30.0
    """How long SIGTERM waits for in-flight batches before giving up (offsets stay safe)."""
    max_records_in_flight: int = Field(default=5_000, ge=1)
    """Records fetched and not yet durable; at this many the partitions are paused (polling
    goes on, so the consumer stays in its group)."""
    resume_ratio: float = Field(default=0.5, gt=0, lt=1)
    """Paused partitions resume once in-flight records fall below this share of the limit."""


class RulesSettings(_Section):
    path: Path | None = None
    """A TOML rule file; ``None`` uses the shipped default set (English and Chinese)."""
    reload_interval_s: float = Field(default=2.0, ge=0)
    """How often the worker checks the rule file's mtime and reloads it (0 = never)."""
    strikes_ttl_s: float = Field(default=30.0, ge=0)
    """How long a sender's stored strike total (moderators' decisions) is cached for the rules."""


class ReliabilitySettings(_Section):
    """The outbox relay and the re-scoring of verdicts decided without the model."""

    outbox_interval_s: float = Field(default=5.0, gt=0)
    """How often unpublished verdict rows are looked for and published again."""
    outbox_min_age_s: float = Field(default=5.0, ge=0)
    """Only rows unpublished for this long are re-sent (younger ones are still in flight)."""
    outbox_batch_items: int = Field(default=500, ge=1)
    rescore_interval_s: float = Field(default=5.0, gt=0)
    """How often the worker looks for ``pending_model`` verdicts while the model is ready."""
    rescore_batch_items: int = Field(default=100, ge=1)


class HttpSettings(_Section):
    host: str = "127.0.0.1"
    port: int = 18080


class ReviewSettings(_Section):
    """The review API and console (``modstream review serve``)."""

    host: str = "127.0.0.1"
    port: int = 18090
    claim_ttl_s: int = Field(default=600, ge=10)
    """A claim not decided or released within this returns its item to the queue."""
    max_claims_per_user: int = Field(default=5, ge=1)
    strike_decay_days: int = Field(default=30, ge=1)
    """A strike stops counting towards ``metadata.sender_strikes`` after this many days."""
    repeat_offender_weight: float = 0.1
    """Queue rank added per active strike of the sender (capped at five strikes)."""
    age_weight_per_hour: float = 0.02
    """Queue rank added per hour an item has waited (capped at 24 hours)."""
    confidence_weight: float = 0.2
    """Queue rank added per unit of the model's highest harmful probability."""
    session_ttl_s: int = Field(default=43_200, ge=60)
    """Console sign-ins last this long."""
    cookie_secure: bool = False
    """Mark the console cookie ``Secure``; turn on whenever the console is served over HTTPS."""
    publish_retry_s: float = Field(default=5.0, gt=0)
    """How often unpublished decisions (Kafka was down) are retried."""


class StackSettings(_Section):
    """Where and how ``modstream stack`` runs the local services."""

    state_dir: Path = Field(default_factory=lambda: project_root() / ".modstream")
    kafka_port: int = 19092
    kafka_controller_port: int = 19093
    kafka_heap_mb: int = 512
    postgres_port: int = 15432
    triton_http_port: int = 18000
    triton_grpc_port: int = 18001
    triton_metrics_port: int = 18002
    model_repository: Path = Field(default_factory=lambda: project_root() / "model_repository")
    partitions: int = 4


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MODSTREAM_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )

    kafka: KafkaSettings = KafkaSettings()
    postgres: PostgresSettings = PostgresSettings()
    triton: TritonSettings = TritonSettings()
    batch: BatchSettings = BatchSettings()
    policy: PolicyThresholds = PolicyThresholds()
    """Thresholds on model probabilities (``MODSTREAM_POLICY__BLOCK_HATE=0.9`` ...); the pure
    dataclass of ``pipelines.policy`` itself, validated by its own checks."""
    rules: RulesSettings = RulesSettings()
    reliability: ReliabilitySettings = ReliabilitySettings()
    http: HttpSettings = HttpSettings()
    review: ReviewSettings = ReviewSettings()
    stack: StackSettings = StackSettings()
    log_level: str = "info"
    log_message_text: bool = False
    """Never on by default: message text stays out of logs."""
    failpoint: str | None = None
    """Testing only (``MODSTREAM_FAILPOINT=after_pg_commit`` or ``name@N`` for the N-th pass):
    the worker SIGKILLs itself there; see ``worker.failpoints``."""
