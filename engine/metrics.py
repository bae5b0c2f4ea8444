"""Every Prometheus metric the worker exports, in one place, prefixed ``modstream_``.

Besides these, each registry carries the standard process, platform and GC collectors
(``common.metrics_registry``). The online service adds its own on the same registry
(``online.metrics``); the review service has its own (``review.metrics``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from common.metrics_registry import service_registry
from pipelines.verdict import DecidedBy, Decision

__all__ = ["PRODUCE_TO_VERDICT_BUCKETS_S", "SHADOW_DROP_REASONS", "Metrics", "ReplicaMetrics"]

_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
PRODUCE_TO_VERDICT_BUCKETS_S: tuple[float, ...] = (
    0.005,
    0.01,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.125,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.75,
    1,
    1.5,
    2,
    3,
    5,
    10,
    30,
    60,
    120,
)
"""Finer around the 250 ms latency target, so quantiles read from the buckets are close."""
SHADOW_DROP_REASONS: tuple[str, ...] = (
    "queue_full",
    "unavailable",
    "rejected",
    "store_failed",
    "shutdown",
)
"""Why shadow work was dropped (``engine.shadow``); every reason's series starts at zero."""


class ReplicaMetrics:
    """Per Triton replica (label ``replica``, its gRPC address): calls, failures, the breaker's
    state and latency; and how many replicas the pool holds. Any service using the inference
    client can register these; a replica's series go when it leaves the pool."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.calls_total = Counter(
            "modstream_inference_replica_calls_total",
            "Inference calls sent to a Triton replica (retries included).",
            ["replica"],
            registry=r,
        )
        self.failures_total = Counter(
            "modstream_inference_replica_failures_total",
            "Inference calls a Triton replica failed, by error type.",
            ["replica", "error"],
            registry=r,
        )
        self.breaker_state = Gauge(
            "modstream_inference_replica_breaker_state",
            "1 for the replica's current circuit breaker state, 0 for the others.",
            ["replica", "state"],
            registry=r,
        )
        self.replicas = Gauge(
            "modstream_inference_replicas",
            "Triton replicas in the pool (with triton.grpc_dns: the addresses the name has).",
            registry=r,
        )
        self.call_seconds = Histogram(
            "modstream_inference_replica_call_seconds",
            "Latency of one inference call to a Triton replica, failed calls included.",
            ["replica"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )


class Metrics:
    """A registry per worker instance, so tests can run several workers in one process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or service_registry()
        r = self.registry
        self.records_total = Counter(
            "modstream_records_total", "Records fetched from Kafka.", registry=r
        )
        self.dead_letters_total = Counter(
            "modstream_dead_letters_total",
            "Records dead-lettered, by reason.",
            ["reason"],
            registry=r,
        )
        self.verdicts_total = Counter(
            "modstream_verdicts_total",
            "Verdicts stored, by decision and stage.",
            ["decision", "decided_by"],
            registry=r,
        )
        # Every decision and stage from zero, so a rate over a window that saw a series appear
        # counts its first verdicts too (Prometheus cannot see the increase to a first sample).
        for decision in Decision:
            for decided_by in DecidedBy:
                self.verdicts_total.labels(decision.value, decided_by.value)
        self.escalations_total = Counter(
            "modstream_escalations_total", "Verdicts sent to human review.", registry=r
        )
        self.rule_hits_total = Counter(
            "modstream_rule_hits_total", "Rule matches, by category.", ["category"], registry=r
        )
        self.batches_total = Counter(
            "modstream_batches_total",
            "Batches flushed, by kind and close reason.",
            ["kind", "reason"],
            registry=r,
        )
        self.batch_size = Histogram(
            "modstream_batch_size_items",
            "Items per flushed batch.",
            buckets=(1, 5, 10, 25, 50, 100, 200, 500),
            registry=r,
        )
        self.inference_seconds = Histogram(
            "modstream_inference_seconds",
            "Triton call latency per batch.",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.inference_failures_total = Counter(
            "modstream_inference_failures_total",
            "Failed inference calls, by error type.",
            ["error"],
            registry=r,
        )
        self.model_attribution_total = Counter(
            "modstream_model_attribution_total",
            "Escalated model verdicts by what became of their word attribution: attributed,"
            " failed (the extra inference call failed: stored without), skipped (past the"
            " call's variant bound).",
            ["outcome"],
            registry=r,
        )
        for outcome in ("attributed", "failed", "skipped"):
            self.model_attribution_total.labels(outcome)
        self.model_attribution_seconds = Histogram(
            "modstream_model_attribution_seconds",
            "The extra inference call of a batch's escalations (leave-one-word-out).",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.sink_seconds = Histogram(
            "modstream_sink_seconds",
            "Postgres transaction time per batch.",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.end_to_end_seconds = Histogram(
            "modstream_end_to_end_seconds",
            "From fetch to stored verdict.",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.produce_to_verdict_seconds = Histogram(
            "modstream_produce_to_verdict_seconds",
            "From the Kafka record's timestamp to its verdict committed in Postgres.",
            buckets=PRODUCE_TO_VERDICT_BUCKETS_S,
            registry=r,
        )
        self.open_tasks = Gauge(
            "modstream_open_tasks",
            "asyncio tasks not yet done in the worker's event loop (a leak shows as growth).",
            registry=r,
        )
        self.in_flight_records = Gauge(
            "modstream_in_flight_records",
            "Records fetched and not yet durably handled.",
            registry=r,
        )
        self.in_flight_bytes = Gauge(
            "modstream_in_flight_bytes",
            "Bytes (key plus value) of the records fetched and not yet durably handled.",
            registry=r,
        )
        self.breaker_open = Gauge(
            "modstream_inference_breaker_open",
            "1 while the inference circuit is open.",
            registry=r,
        )
        self.replicas = ReplicaMetrics(r)
        self.event_loop_lag_seconds = Gauge(
            "modstream_event_loop_lag_seconds",
            "How late the event loop ran a 0.5 s timer.",
            registry=r,
        )
        self.consumer_lag_records = Gauge(
            "modstream_consumer_lag_records",
            "Records of an assigned partition not yet durably handled: the partition's end "
            "offset on the broker minus the next offset this worker would commit.",
            ["topic", "partition"],
            registry=r,
        )
        self.oldest_in_flight_age_seconds = Gauge(
            "modstream_oldest_in_flight_age_seconds",
            "Time since the oldest record fetched and not yet durably handled was fetched "
            "(0 when none is in flight).",
            registry=r,
        )
        self.consumer_paused = Gauge(
            "modstream_consumer_paused",
            "1 while fetching is paused because too many records are in flight.",
            registry=r,
        )
        self.rescored_total = Counter(
            "modstream_rescored_total",
            "pending_model verdicts re-scored with the model and updated in place.",
            registry=r,
        )
        self.rescore_rejected_total = Counter(
            "modstream_rescore_rejected_total",
            "pending_model verdicts whose text the model refused: kept rules-only, not re-scored "
            "(listed in rescore_rejections).",
            registry=r,
        )
        self.outbox_relayed_total = Counter(
            "modstream_outbox_relayed_total",
            "Verdicts published again by the outbox relay.",
            registry=r,
        )
        self.outbox_backlog_records = Gauge(
            "modstream_outbox_backlog_records",
            "Stored verdicts the last outbox relay round left unpublished (0 when it emptied "
            "the outbox; while Kafka refuses, at least the page that failed).",
            registry=r,
        )
        self.rules_reloads_total = Counter(
            "modstream_rules_reloads_total",
            "Rule file reloads, by result (installed or rejected).",
            ["result"],
            registry=r,
        )
        # Both results from zero, so the first rejection is an increase an alert can see.
        for result in ("installed", "rejected"):
            self.rules_reloads_total.labels(result)
        self.rule_engines = Gauge(
            "modstream_rule_engines",
            "Distinct rule engines in use: the default stack's and one per distinct tenant stack.",
            registry=r,
        )
        self.policy_reloads_total = Counter(
            "modstream_policy_reloads_total",
            "Policy file reloads, the tenants' included, by result (installed or rejected: the "
            "thresholds in use stay).",
            ["result"],
            registry=r,
        )
        for result in ("installed", "rejected"):
            self.policy_reloads_total.labels(result)
        self.policy_threshold = Gauge(
            "modstream_policy_threshold",
            "The default tenant's policy thresholds every decision uses now (settings, then the "
            "policy file).",
            ["threshold"],
            registry=r,
        )
        self.policy_tenants = Gauge(
            "modstream_policy_tenants",
            "Tenants deciding with a policy file of their own (policy_file.tenants_dir).",
            registry=r,
        )
        self.rescan_kept_total = Counter(
            "modstream_rescan_kept_total",
            "Verdicts a person decided (or holds) that an applied rescan left as they are, with "
            "what it would now decide recorded beside them; would = same or different.",
            ["would"],
            registry=r,
        )
        for would in ("same", "different"):
            self.rescan_kept_total.labels(would)
        self.shadow_scored_total = Counter(
            "modstream_shadow_scored_total",
            "Messages the shadow model scored and stored in shadow_verdicts (never acted on).",
            registry=r,
        )
        self.shadow_dropped_total = Counter(
            "modstream_shadow_dropped_total",
            "Messages of model batches the shadow model did not score, by reason: queue_full "
            "(shed so live work never waits), unavailable, rejected, store_failed, shutdown.",
            ["reason"],
            registry=r,
        )
        for reason in SHADOW_DROP_REASONS:
            self.shadow_dropped_total.labels(reason)
        self.shadow_inference_seconds = Histogram(
            "modstream_shadow_inference_seconds",
            "Shadow model call latency per batch.",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.rollups_refreshed_timestamp_seconds = Gauge(
            "modstream_rollups_refreshed_timestamp_seconds",
            "Unix time of the last analysts' rollup refresh this worker completed (0 until one "
            "has; the latest over the workers is how fresh the rollups are).",
            registry=r,
        )
        self.publish_failures_total = Counter(
            "modstream_publish_failures_total",
            "Verdict publications that failed (retried).",
            registry=r,
        )
