"""Prometheus metrics of the review service, served at ``/metrics`` (prefix ``modstream_review_``).

The decision relay's health: decisions published, refusals, decisions set aside as failed (alert
on any increase of ``modstream_review_decisions_failed_total``, or on
``modstream_review_failed_decisions`` above zero), and the age of the oldest decision still
waiting for Kafka (alert when it grows: the relay is stuck or Kafka is away). The backlog figures
are read from the outbox at scrape time, so they are right even if the relay loop is stuck.

The queues, read at scrape time too: unresolved items per queue (``open``, ``claimed``), the age
of each queue's oldest unresolved item, and each queue's decision target (``review``
settings), so an alert compares the two without copying the target into the rule, and the
items already past it (an appeal: past its own deadline) as ``overdue``.

Appeals: filed (new ones, by channel), refused (by channel and reason code) and decided (by
category and outcome). Labels are bounded sets only; figures per moderator are the analysts'
views' (``analytics_appeal_rates_by_moderator``). The registry also carries the standard
process, platform and GC collectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge
from prometheus_client.exposition import generate_latest

from common.metrics_registry import service_registry
from review.decisions import OutboxBacklog
from review.schemas import QueueDepth

__all__ = ["ReviewMetrics"]


class ReviewMetrics:
    """One registry per app, so tests and several apps in a process never share counters."""

    def __init__(self) -> None:
        self.registry = r = service_registry()
        self.decisions_published_total = Counter(
            "modstream_review_decisions_published_total",
            "Decisions published to Kafka by the outbox relay.",
            registry=r,
        )
        self.decision_refusals_total = Counter(
            "modstream_review_decision_refusals_total",
            "Times Kafka refused a decision's record itself (too large, corrupt).",
            registry=r,
        )
        self.decisions_failed_total = Counter(
            "modstream_review_decisions_failed_total",
            "Decisions set aside as failed after their attempts (kept for an admin): alert.",
            registry=r,
        )
        self.oldest_unpublished_age_seconds = Gauge(
            "modstream_review_oldest_unpublished_decision_age_seconds",
            "Age of the oldest decision not yet published and not failed (0 when none).",
            registry=r,
        )
        self.failed_decisions = Gauge(
            "modstream_review_failed_decisions",
            "Decisions currently marked failed in the outbox, waiting for an admin.",
            registry=r,
        )

        self.queue_items = Gauge(
            "modstream_review_queue_items",
            "Unresolved review items by queue and state (open: waiting for a moderator, an "
            "expired claim included; claimed: held by a live claim).",
            ["queue", "state"],
            registry=r,
        )
        self.queue_oldest_item_age_seconds = Gauge(
            "modstream_review_queue_oldest_item_age_seconds",
            "Age of the queue's oldest unresolved item, claimed or not (0 when empty).",
            ["queue"],
            registry=r,
        )
        self.queue_target_seconds = Gauge(
            "modstream_review_queue_target_seconds",
            "How soon an item of the queue should be decided (review.*_target_s).",
            ["queue"],
            registry=r,
        )

        self.queue_overdue_items = Gauge(
            "modstream_review_queue_overdue_items",
            "Unresolved items past the queue's target (review.*_target_s); an appeal past its "
            "own deadline.",
            ["queue"],
            registry=r,
        )
        self.appeals_filed_total = Counter(
            "modstream_review_appeals_filed_total",
            "Appeals filed (replays of an appeal id not counted), by channel (api, kafka).",
            ["channel"],
            registry=r,
        )
        self.appeals_refused_total = Counter(
            "modstream_review_appeals_refused_total",
            "Appeals refused, by channel and reason code (a Kafka record: dead-lettered).",
            ["channel", "reason"],
            registry=r,
        )
        self.appeals_decided_total = Counter(
            "modstream_review_appeals_decided_total",
            "Appeals decided, by the appealed message's category and outcome.",
            ["category", "outcome"],
            registry=r,
        )
        for channel in ("api", "kafka"):
            self.appeals_filed_total.labels(channel)

    def observe_queues(self, depths: Sequence[QueueDepth], targets_s: Mapping[str, float]) -> None:
        for depth in depths:
            self.queue_items.labels(depth.queue, "open").set(depth.open)
            self.queue_items.labels(depth.queue, "claimed").set(depth.claimed)
            self.queue_oldest_item_age_seconds.labels(depth.queue).set(depth.oldest_age_s)
            self.queue_overdue_items.labels(depth.queue).set(depth.overdue)
        for queue, target_s in targets_s.items():
            self.queue_target_seconds.labels(queue).set(target_s)

    def observe_backlog(self, backlog: OutboxBacklog) -> None:
        self.oldest_unpublished_age_seconds.set(backlog.oldest_unpublished_age_s)
        self.failed_decisions.set(backlog.failed)

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
