"""The online service's settings: the shared sections, the daemon's parts it reuses, its own.

Loaded once by ``modstream online`` (``MODSTREAM_ONLINE__PORT=18070``,
``MODSTREAM_ONLINE__MAX_WAIT_MS=5`` ...; see ``common.settings`` for the naming). The Triton,
policy, rules and reliability sections are the daemon's own section types, so a deployment
configures both programs the same way.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from common.settings import Section, ServiceSettings
from engine.settings import (
    HttpSettings,
    InferenceSettings,
    PolicyFileSettings,
    ReliabilitySettings,
    RulesSettings,
    TritonSettings,
)
from pipelines.policy import PolicyThresholds

__all__ = ["OnlineSection", "OnlineSettings", "PerspectiveSection"]


class OnlineSection(Section):
    """The gRPC server, its batch collector and its time budgets."""

    host: str = "127.0.0.1"
    port: int = Field(default=18070, ge=0, le=65535)
    """0 picks a free port (tests)."""
    max_items: int = Field(default=32, ge=1)
    """Messages coalesced into one model request at most."""
    max_wait_ms: float = Field(default=15.0, gt=0)
    """The pace of model batches: one closes this long after the previous one closed, at once
    when that much time has already passed, sooner when at the recent arrival rate no other
    message is due by then, or when full. Under load a batch goes about every ``max_wait_ms``
    with what arrived meanwhile; at a low rate a message goes at once; none waits longer than
    this for its batch to close."""
    max_in_flight: int = Field(default=4, ge=1)
    """Model batches being inferred or written at once."""
    publish_every_ms: float = Field(default=20.0, gt=0)
    """How often the verdicts stored since the last time are published to Kafka, as one
    publish (callers never wait for it: they are answered once their verdict is durable)."""
    queue_limit: int = Field(default=2_000, ge=1)
    """Messages admitted and not yet answered; one more is refused with RESOURCE_EXHAUSTED."""
    model_budget_ms: float = Field(default=250.0, gt=0)
    """The longest a message may wait for the model (collector, queue and inference)."""
    write_reserve_ms: float = Field(default=50.0, ge=0)
    """Kept out of the model's share of the caller's deadline: storing the verdict and answering."""
    min_model_ms: float = Field(default=2.0, ge=0)
    """A message whose model budget has less left than this when its batch starts gets the
    rules-only verdict at once (it would only time out)."""
    default_deadline_ms: float = Field(default=2_000.0, gt=0)
    """The deadline of a call that carries none."""
    max_batch_messages: int = Field(default=100, ge=1)
    """Messages one ``CheckMessages`` call may carry."""
    replay_poll_ms: float = Field(default=20.0, gt=0)
    """How often a repeated call looks for the verdict its first call is still deciding."""
    require_token: bool = True
    """Calls must carry ``authorization: Bearer <platform token>``."""
    token_cache_s: float = Field(default=30.0, ge=0)
    """How long an accepted token is remembered (a disabled user is refused after this)."""
    health_interval_s: float = Field(default=5.0, gt=0)
    """How often the model and PostgreSQL are checked for the gRPC health service."""
    tls_certificate_chain: Path | None = None
    """PEM certificate chain of the server; with ``tls_private_key`` the server speaks TLS."""
    tls_private_key: Path | None = None
    tls_client_ca: Path | None = None
    """CA bundle for client certificates: set to require mutual TLS."""

    @model_validator(mode="after")
    def _check_tls(self) -> OnlineSection:
        if (self.tls_certificate_chain is None) != (self.tls_private_key is None):
            raise ValueError("tls_certificate_chain and tls_private_key go together")
        if self.tls_client_ca is not None and self.tls_private_key is None:
            raise ValueError("tls_client_ca needs the server's own certificate and key")
        for name in ("tls_certificate_chain", "tls_private_key", "tls_client_ca"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"online.{name}: no such file: {path}")
        return self

    @property
    def tls(self) -> bool:
        return self.tls_private_key is not None


class PerspectiveSection(Section):
    """``POST /v1alpha1/comments:analyze``, Perspective API's wire format (docs/perspective.md),
    over plain HTTP beside the gRPC port (``MODSTREAM_PERSPECTIVE__*``)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=18072, ge=0, le=65535)
    """0 picks a free port (tests)."""
    qps: float = Field(default=100.0, gt=0)
    """Calls per second each API key may make (a token bucket); over it: 429
    RESOURCE_EXHAUSTED."""
    burst: float = Field(default=100.0, ge=1)
    """Calls a key may make at once after a quiet spell (the bucket's size)."""
    max_body_bytes: int = Field(default=65_536, ge=1_024)
    """A larger request body is refused with 413 before it is read whole."""


class OnlineSettings(ServiceSettings):
    """Everything ``modstream online`` reads."""

    online: OnlineSection = OnlineSection()
    triton: TritonSettings = TritonSettings()
    inference: InferenceSettings = InferenceSettings()
    policy: PolicyThresholds = PolicyThresholds()
    policy_file: PolicyFileSettings = PolicyFileSettings()
    rules: RulesSettings = RulesSettings()
    reliability: ReliabilitySettings = ReliabilitySettings()
    http: HttpSettings = HttpSettings(port=18071)
    """``/metrics``, ``/healthz`` and ``/readyz`` over plain HTTP beside the gRPC port
    (``MODSTREAM_HTTP__PORT``; 0 picks a free port)."""
    perspective: PerspectiveSection = PerspectiveSection()
