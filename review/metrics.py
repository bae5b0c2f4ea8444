"""Prometheus metrics of the review service, served at ``/metrics`` (prefix ``modstream_review_``).

The decision relay's health: decisions published, refusals, decisions set aside as failed (alert
on any increase of ``modstream_review_decisions_failed_total``, or on
``modstream_review_failed_decisions`` above zero), and the age of the oldest decision still
waiting for Kafka (alert when it grows: the relay is stuck or Kafka is away). The backlog figures
are read from the outbox at scrape time, so they are right even if the relay loop is stuck.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

from review.decisions import OutboxBacklog

__all__ = ["ReviewMetrics"]


class ReviewMetrics:
    """One registry per app, so tests and several apps in a process never share counters."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
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

    def observe_backlog(self, backlog: OutboxBacklog) -> None:
        self.oldest_unpublished_age_seconds.set(backlog.oldest_unpublished_age_s)
        self.failed_decisions.set(backlog.failed)

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
