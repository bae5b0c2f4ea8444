"""The online service's parts: the shared moderation parts (``engine.parts``) and its own.

The shared parts are built by ``engine.parts.build_parts`` (with the online pool's light reset
and the ``online`` name in the verdict store), and its batch processor by
``engine.parts.build_processor``, over two seams made for this service: its acknowledger is
``online.answers`` (a durable verdict answers its call) and it has no offset tracker (online
coordinates are claims, ``online.claims``); its model calls go through the caller's budget
(``online.budget``); it publishes on a clock (``online.paced_publishing``) and its published
marks ride on its next verdict write (``engine.stores.carried_marks``). What only this service has
(claims, the collector, the moderator, its background loops over the online rows) is made here;
the gRPC server itself is the runner's (``online.app``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.breaker import BreakerState
from engine.parts import ModerationParts, build_parts, build_processor
from engine.supervisor import Loop
from online.answers import PendingAnswers
from online.budget import BudgetedInference
from online.claimed_writes import ClaimedWrites
from online.claims import ONLINE_PARTITION, ONLINE_TOPIC, ClaimStore
from online.collector import Collector
from online.metrics import ObservedProcessor, OnlineMetrics
from online.moderator import OnlineModerator
from online.paced_publishing import PacedPublishing
from online.settings import OnlineSettings

__all__ = ["OnlineParts", "build_online_parts"]

CONSUMER_GROUP = "online"
"""Names the online service in ``VerdictBatchStore`` (it stores no consumer offsets)."""


@dataclass(slots=True)
class OnlineParts:
    """Everything ``modstream online`` runs besides its gRPC server."""

    moderation: ModerationParts
    metrics: OnlineMetrics
    """The service's own metrics, on the shared registry (``online.metrics``)."""
    claims: ClaimStore
    collector: Collector
    moderator: OnlineModerator
    loops: dict[str, Loop]
    """The re-scorer and the outbox relay over the online rows, the publishing loop
    (``online.paced_publishing``), the rule and policy file watches and the shadow scorer."""


def _online_partitions() -> Sequence[int]:
    return [ONLINE_PARTITION]


def build_online_parts(
    settings: OnlineSettings, *, moderation: ModerationParts | None = None
) -> OnlineParts:
    """The online service's parts over ``moderation`` (built from ``settings`` if not given)."""
    parts = moderation or build_parts(settings, consumer_group=CONSUMER_GROUP, light_reset=True)
    metrics = OnlineMetrics(parts.metrics.registry)
    answers = PendingAnswers()
    claims = ClaimStore(parts.database)
    processor = build_processor(
        parts,
        settings,
        acknowledger=answers,
        positions=None,
        store=ClaimedWrites(parts.verdicts, claims),
        inference=BudgetedInference(parts.inference, metrics.budget_missed("inference")),
        publish_every_s=settings.online.publish_every_ms / 1000.0,
    )
    publishing = PacedPublishing(
        processor.publish_stored, parts.marks, every_s=settings.online.publish_every_ms / 1000.0
    )
    o = settings.online
    inference = parts.inference
    collector = Collector(
        answers=answers,
        processor=ObservedProcessor(processor, metrics),
        max_items=o.max_items,
        max_wait_s=o.max_wait_ms / 1000.0,
        max_in_flight=o.max_in_flight,
        queue_items=o.queue_limit + 1,
        min_model_s=o.min_model_ms / 1000.0,
        model_usable=lambda: inference.state is not BreakerState.OPEN,
        on_budget_spent=metrics.budget_missed("queued"),
    )
    moderator = OnlineModerator(
        collector=collector,
        claims=claims,
        rules=parts.rules,
        strikes=parts.strikes,
        settings=o,
        store_ok=lambda: processor.store_healthy,
    )
    rel = settings.reliability
    loops: dict[str, Loop] = {
        "rescore": lambda done: parts.rescorer.run(
            done, rel.rescore_interval_s, inference.probe, ONLINE_TOPIC, _online_partitions
        ),
        "outbox": lambda done: parts.relay.run(
            done, rel.outbox_interval_s, ONLINE_TOPIC, _online_partitions
        ),
        "publish": publishing.run,
    }
    if parts.rules_watch is not None:
        loops["rules_watch"] = parts.rules_watch.run
    if parts.tenant_rules_watch is not None:
        loops["tenant_rules_watch"] = parts.tenant_rules_watch.run
    if parts.policy_watch is not None:
        loops["policy_watch"] = parts.policy_watch.run
    if parts.tenant_policy_watch is not None:
        loops["tenant_policy_watch"] = parts.tenant_policy_watch.run
    if parts.shadow is not None:
        parts.shadow.defer_to(lambda: collector.model_saturated)
        loops["shadow"] = parts.shadow.run
    return OnlineParts(
        moderation=parts,
        metrics=metrics,
        claims=claims,
        collector=collector,
        moderator=moderator,
        loops=loops,
    )
