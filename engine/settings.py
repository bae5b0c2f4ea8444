"""The sections of settings both moderating services read (``worker.settings.WorkerSettings``,
``online.settings.OnlineSettings``).

Loaded once at each service's entry point (``MODSTREAM_BATCH__MAX_ITEMS=50`` ...; see
``common.settings`` for the naming); components receive their own section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from common.rollups import DEFAULT_PAGE_ROWS
from common.settings import (
    KafkaSettings,
    PostgresSettings,
    Section,
    project_root,
)
from engine.replica_dns import split_host_port

__all__ = [
    "BatchSettings",
    "HttpSettings",
    "InferenceSettings",
    "KafkaSettings",
    "PolicyFileSettings",
    "PostgresSettings",
    "ReliabilitySettings",
    "RollupSettings",
    "RulesSettings",
    "TritonSettings",
]


class TritonSettings(Section):
    grpc_url: str = "127.0.0.1:18001"
    """The one Triton replica when ``grpc_urls`` is empty."""
    grpc_urls: tuple[str, ...] = ()
    """A pool of replicas (``MODSTREAM_TRITON__GRPC_URLS='["a:8001","b:8001"]'``): one channel
    and one circuit breaker each, round-robin over the healthy ones; empty means ``[grpc_url]``
    (set one of the two, not both)."""
    grpc_dns: str = ""
    """A ``host:port`` whose name resolves to every replica (a Kubernetes headless Service,
    ``triton-replicas:8001``): the pool holds one replica per address the name has, looked up
    again every ``dns_refresh_s``; a replica that leaves is drained, not cut off. Set this, or
    ``grpc_url`` / ``grpc_urls``, not both."""
    dns_refresh_s: float = Field(default=5.0, gt=0)
    """How often ``grpc_dns`` is looked up again (new pods get traffic within about this)."""
    model_name: str = "moderation"
    model_version: str = ""
    """Empty means the version policy's latest; set to pin, e.g. ``"1"``."""
    request_timeout_s: float = 30.0
    """Deadline of one inference call, its retries (on other replicas) included."""
    max_attempts: int = 4
    retry_budget_ratio: float = 0.2
    """Retries allowed as a fraction of recent calls, so retries cannot multiply an outage."""
    backoff_base_s: float = 0.1
    backoff_max_s: float = 2.0
    ready_timeout_s: float = 120.0
    """How long start-up waits for the server and the model to report ready."""
    shadow_model_name: str = ""
    """A second model that scores every model batch beside the live one, on the same replicas:
    its decisions (same rules and policy) are stored in ``shadow_verdicts`` and never acted on
    (``engine.shadow``); empty: no shadow."""
    shadow_model_version: str = ""
    """The shadow's version (``"1"``); empty means its version policy's latest."""
    shadow_queue_batches: int = Field(default=4, ge=1)
    """Model batches waiting for the shadow at most (a shadow call starts only while live work
    has room); past that, shadow work is dropped (``modstream_shadow_dropped_total``)."""
    breaker_failure_threshold: int = 5
    breaker_reset_s: float = 10.0
    ssl: bool = False
    """Speak TLS to Triton (``--grpc-use-ssl``); the files below are PEM paths."""
    root_certificates: Path | None = None
    """CA bundle that signed the server's certificate; ``None`` uses the system's roots."""
    private_key: Path | None = None
    """Client key for mutual TLS (with ``certificate_chain``)."""
    certificate_chain: Path | None = None
    """Client certificate chain for mutual TLS (with ``private_key``)."""

    @property
    def replica_urls(self) -> list[str]:
        """The replicas to talk to: ``grpc_urls``, or ``grpc_url`` alone (with ``grpc_dns``,
        the pool starts empty and follows the name instead)."""
        if self.grpc_dns:
            return []
        return list(self.grpc_urls) or [self.grpc_url]

    @model_validator(mode="after")
    def _check_urls(self) -> TritonSettings:
        if self.grpc_urls and "grpc_url" in self.model_fields_set:
            raise ValueError("set triton.grpc_url (one replica) or triton.grpc_urls, not both")
        if self.grpc_dns:
            if self.grpc_urls or "grpc_url" in self.model_fields_set:
                raise ValueError("set triton.grpc_dns or triton.grpc_url(s), not both")
            split_host_port(self.grpc_dns)
            return self
        urls = self.replica_urls
        if any(not url.strip() for url in urls):
            raise ValueError("triton.grpc_urls: empty address")
        if len(set(urls)) != len(urls):
            raise ValueError(f"triton.grpc_urls: an address is listed twice: {urls}")
        return self

    @model_validator(mode="after")
    def _check_shadow(self) -> TritonSettings:
        if self.shadow_model_version and not self.shadow_model_name:
            raise ValueError("triton.shadow_model_version needs triton.shadow_model_name")
        live = (self.model_name, self.model_version)
        if self.shadow_model_name and (self.shadow_model_name, self.shadow_model_version) == live:
            raise ValueError("triton.shadow_model_name/version name the live model itself")
        return self

    @model_validator(mode="after")
    def _check_tls_files(self) -> TritonSettings:
        files = {
            "root_certificates": self.root_certificates,
            "private_key": self.private_key,
            "certificate_chain": self.certificate_chain,
        }
        given = {name: path for name, path in files.items() if path is not None}
        if given and not self.ssl:
            raise ValueError(f"{', '.join(given)} set but ssl is false: set triton.ssl=true")
        if (self.private_key is None) != (self.certificate_chain is None):
            raise ValueError("private_key and certificate_chain go together (mutual TLS)")
        for name, path in given.items():
            if not path.is_file():
                raise ValueError(f"triton.{name}: no such file: {path}")
        return self


class InferenceSettings(Section):
    """Which model backend scores messages (``engine.parts`` builds it).

    ``triton`` (the default): the KServe v2 gRPC client of the ``triton`` section, for any Open
    Inference Protocol server (Triton, MLServer). ``inprocess``: the model repository's own
    ``model.py`` (the same code Triton runs: ONNX Runtime for the real models) loaded inside
    this process and called on a thread pool (``engine.inprocess``); it needs the ``models``
    extra's packages. Both read the model name, version, deadline and breaker settings of the
    ``triton`` section, so ``triton.model_version`` pins or rolls back either.
    """

    backend: Literal["triton", "inprocess"] = "triton"
    repository: Path = Field(default_factory=lambda: project_root() / "model_repository")
    """``inprocess``: the Triton model repository to load ``triton.model_name`` from."""
    instances: int = Field(default=1, ge=1)
    """``inprocess``: model instances, each on a thread of its own (one call at a time each),
    as a Triton ``instance_group`` count; the real model's encoder already uses every core."""


class BatchSettings(Section):
    max_items: int = Field(default=100, ge=1)
    max_wait_s: float = Field(default=5.0, gt=0)
    target_latency_ms: int | None = Field(default=250, gt=0)
    """Below the ``max_items`` / ``max_wait_s`` upper bounds, a model batch also closes when its
    oldest message has waited this long (queue time included), and at once when the model has
    no request in flight; ``None`` turns the age rule off."""
    max_in_flight: int = Field(default=4, ge=1)
    """Batches being inferred or written at once; bounds memory and overlaps the stages."""
    drain_timeout_s: float = 30.0
    """How long SIGTERM waits for in-flight batches before giving up (offsets stay safe)."""
    max_records_in_flight: int = Field(default=5_000, ge=1)
    """Records fetched and not yet durable; at this many the partitions are paused (polling
    goes on, so the consumer stays in its group)."""
    max_bytes_in_flight: int = Field(default=64 * 1024 * 1024, ge=1)
    """Bytes (key plus value) of those records; at this many the partitions are paused too, so
    memory is bounded by bytes, not only by a count (one fetch, ``kafka.fetch_max_bytes``, can
    still land on top)."""
    resume_ratio: float = Field(default=0.5, gt=0, lt=1)
    """Paused partitions resume once in-flight records fall below this share of the limit."""


class RulesSettings(Section):
    path: Path | None = None
    """A TOML rule file; ``None`` uses the shipped default set (English and Chinese)."""
    reload_interval_s: float = Field(default=2.0, ge=0)
    """How often the worker checks the rule file's mtime and reloads it (0 = never)."""
    strikes_ttl_s: float = Field(default=30.0, ge=0)
    """How long a sender's stored strike total (moderators' decisions) is cached for the rules."""
    tenants_dir: Path | None = None
    """A folder of tenant rule files, ``<tenant id>.toml`` each (usually a layer that
    ``extends = "default"``), watched like ``path`` every ``reload_interval_s``; ``None``: every
    message uses the default stack (``path``, or the shipped set)."""
    max_tenants: int = Field(default=10_000, ge=1)
    """The most tenant rule files loaded; files past it (by name) are refused."""
    max_stacks: int = Field(default=32, ge=1)
    """The most distinct rule engines (the default's included); a tenant file that would need
    one more is refused and the tenant keeps the rules it had."""


class PolicyFileSettings(Section):
    """The policy file (``pipelines.policy_file``; ``modstream policy calibrate`` writes one)."""

    path: Path | None = None
    """The default tenant's policy file: TOML ``[levels]`` and ``[thresholds]`` tables read over
    ``policy`` (a key they leave out keeps the ``policy`` value) at start and again whenever it
    changes; ``None``: ``policy`` alone."""
    reload_interval_s: float = Field(default=2.0, ge=0)
    """How often the file's mtime is checked (0 = read at start only); the tenant folder's
    files too."""
    tenants_dir: Path | None = None
    """A folder of tenant policy files, ``<tenant id>.toml`` each (``[levels]`` and
    ``[thresholds]`` read over ``policy``, as ``path`` is), loaded at start and reloaded when
    they change (``engine.tenant_policy_watch``); a tenant without one decides with the default
    tenant's thresholds. ``None``: every tenant decides with the default tenant's."""
    max_tenants: int = Field(default=10_000, ge=1)
    """The most tenant policy files loaded; files past it (by name) are refused."""


class ReliabilitySettings(Section):
    """The outbox relay and the re-scoring of verdicts decided without the model."""

    outbox_interval_s: float = Field(default=5.0, gt=0)
    """How often unpublished verdict rows are looked for and published again."""
    outbox_min_age_s: float = Field(default=5.0, ge=0)
    """Only rows unpublished for this long are re-sent (younger ones are still in flight)."""
    outbox_batch_items: int = Field(default=500, ge=1)
    published_mark_wait_s: float = Field(default=0.5, gt=0)
    """How long the published mark of verdicts Kafka acknowledged waits for the next verdict
    write to carry it (one statement per batch, ``engine.stores.carried_marks``) before it is
    sent as a statement of its own. Keep it well below ``outbox_min_age_s``: the relay sends
    again rows whose mark is still waiting."""
    rescore_interval_s: float = Field(default=5.0, gt=0)
    """How often the worker looks for ``pending_model`` verdicts while the model is ready."""
    rescore_batch_items: int = Field(default=100, ge=1)


class RollupSettings(Section):
    """The analysts' rollups (``worker.rollup_refresh``, docs/analysts.md "Rollups")."""

    refresh_interval_s: float = Field(default=10.0, ge=0)
    """How often the worker counts new and changed verdicts into the rollups (their freshness);
    0 leaves the job to ``modstream rollups refresh`` (a cron job, say)."""
    page_rows: int = Field(default=DEFAULT_PAGE_ROWS, ge=1)
    """Verdict rows counted per step of a refresh (bounds its memory on a large backlog)."""


class HttpSettings(Section):
    host: str = "127.0.0.1"
    port: int = 18080
