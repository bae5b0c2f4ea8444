"""The builder of the moderation parts: settings in, parts out, each part replaceable in tests.

Every program that moderates (``modstream worker``, ``modstream online``, ``modstream rescore``)
runs on the same parts, made here and nowhere else (a ``protected`` import contract in
``pyproject.toml`` lets only the builders import the clients, stores, source, processor and
loops they are made of). Programs receive parts and run them; tests hand in fakes instead of
patching module names (arq's ``Worker`` takes its functions; quix-streams' ``Application``
owns its parts).

- :func:`build_parts` makes what every program shares (:class:`ModerationParts`): metrics, the
  PostgreSQL pool and stores (the verdict write carrying the published marks,
  ``engine.stores.carried_marks``), the Kafka publisher, the inference client (the backend is
  chosen here), the rule stage and its strike cache, the outbox relay and the re-scorer.
- :func:`build_stream_parts` adds the stream's own (:class:`StreamParts`): the offset tracker,
  the Kafka source, the batch processor and its two lanes, and the background loops (the
  published marks no write carried among them).
- :func:`build_processor` is the one way a ``BatchProcessor`` is made; the online service's
  builder (``online.parts``) makes its processor with it, over its own acknowledger.
- :func:`build_rescan` makes ``modstream rescan``'s (:class:`RescanParts`): the shared parts
  over the model to rescan with, the topic's history reader and the rescanner.

The model backend is chosen in :func:`_inference` and nowhere else (``inference.backend``):
the KServe v2 gRPC client (``triton``, the default: Triton or MLServer) or the repository's own
model run in this process on a thread pool (``inprocess``, ``worker.inprocess``). The shadow
scorer (``worker.shadow``: a second inference handle, on ``triton.shadow_model_name``, whose
results are stored and never acted on) is one of the shared parts: :func:`build_parts` makes
it, :func:`build_processor` hands it every model batch, and each service runs its loop and
tells it when live work is saturated.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.logs import get_logger
from common.settings import KafkaSettings, PostgresSettings
from engine.stores.carried_marks import CarriedMarks
from engine.stores.database import Database
from engine.stores.pending_texts import PendingTextStore
from engine.stores.shadow_verdicts import ShadowVerdictStore
from engine.stores.strikes import StrikeStore
from engine.stores.verdict_batches import VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import load_policy_file
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.layers import load_rule_stack
from pipelines.rules.shared_engines import EngineShelf
from worker.backpressure import Backpressure
from worker.batcher import Batch
from worker.consume import drain_partitions
from worker.consumer_lag import ConsumerLagProbe
from worker.dispatch import Dispatcher, Lanes
from worker.failpoints import RESCAN_FAILPOINT_NAMES, Failpoints
from worker.history import TopicHistory
from worker.inference import InferenceClient, InferenceUnavailable
from worker.inprocess import InProcessModerationClient
from worker.metrics import Metrics, ReplicaMetrics
from worker.offsets import OffsetTracker, PartitionKey
from worker.outbox import VerdictOutbox
from worker.policy_stage import PolicyStage
from worker.policy_watch import PolicyWatcher
from worker.processing import Acknowledger, BatchProcessor, BatchStore, Inference
from worker.publisher import KafkaPublisher
from worker.rescan import Rescanner
from worker.rescan_plan import RescanPlan
from worker.rescan_store import RescanStore
from worker.rescore import Rescorer
from worker.rollup_refresh import RollupRefresher
from worker.rule_stage import RuleStage
from worker.rules_watch import RulesWatcher
from worker.sender_strikes import StrikeCache
from worker.settings import (
    InferenceSettings,
    PolicyFileSettings,
    ReliabilitySettings,
    RulesSettings,
    TritonSettings,
    WorkerSettings,
)
from worker.shadow import ShadowScorer
from worker.source import KafkaSource, OffsetStore
from worker.supervisor import Loop, stop_within
from worker.tenant_rules_watch import TenantRulesWatcher
from worker.throttle import TokenBucket
from worker.triton import TritonModerationClient
from worker.watchers import watch_breaker
from worker.work import Work

__all__ = [
    "ModerationParts",
    "ModerationSettings",
    "RescanParts",
    "StreamParts",
    "StreamProcessor",
    "StreamSource",
    "build_parts",
    "build_processor",
    "build_rescan",
    "build_stream_parts",
    "stored_rescan",
]

_log = get_logger(__name__)
_DECIDED_WAIT_S = 0.05
"""Rule blocks and dead letters need no model: their lane flushes almost at once."""


class ModerationSettings(Protocol):
    """The sections every moderating program reads (``WorkerSettings``, ``OnlineSettings``)."""

    @property
    def kafka(self) -> KafkaSettings: ...

    @property
    def postgres(self) -> PostgresSettings: ...

    @property
    def triton(self) -> TritonSettings: ...

    @property
    def inference(self) -> InferenceSettings: ...

    @property
    def policy(self) -> PolicyThresholds: ...

    @property
    def policy_file(self) -> PolicyFileSettings: ...

    @property
    def rules(self) -> RulesSettings: ...

    @property
    def reliability(self) -> ReliabilitySettings: ...


@dataclass(slots=True)
class ModerationParts:
    """What every moderating program runs on. :func:`build_parts` makes the real ones."""

    metrics: Metrics
    database: Database
    verdicts: VerdictBatchStore
    """The one verdict write per batch; it carries the published marks queued in ``marks``."""
    outbox: VerdictOutboxStore
    marks: CarriedMarks
    """The batch processor's published-marker: marks queued for the next verdict write."""
    publisher: KafkaPublisher
    inference: InferenceClient
    rules: RuleStage
    policy: PolicyStage
    """The thresholds in use: ``policy`` settings, then the policy file, reloaded."""
    strikes: StrikeCache
    relay: VerdictOutbox
    rescorer: Rescorer
    rules_watch: RulesWatcher | None
    tenant_rules_watch: TenantRulesWatcher | None = None
    """Reloads the tenant folder's rule files (``None``: no folder, or no reloading)."""
    policy_watch: PolicyWatcher | None = None
    shadow: ShadowScorer | None = None
    """Scores every model batch with ``triton.shadow_model_name`` (``None``: no shadow)."""
    give_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a shutdown stops waiting: work blocked on a dependency that is down abandons."""

    async def open(self, stack: AsyncExitStack, *, ready_timeout_s: float | None) -> None:
        """Start the clients in order, each with a bounded stop on ``stack``: PostgreSQL (and
        the coming months' verdict partitions), the Kafka producer, the inference client
        (waited for up to ``ready_timeout_s``; ``None``: not waited for). A model that is not
        ready is no reason to stop: verdicts are rules-only (``pending_model``) until it is."""
        await self.database.start()
        stack.push_async_callback(stop_within, "postgres", self.database.stop, 1.0)
        await self.verdicts.ensure_partitions()
        await self.publisher.start()
        stack.push_async_callback(stop_within, "kafka_producer", self.publisher.stop, 0.5)
        await self.inference.start(wait_ready=False)
        stack.push_async_callback(stop_within, "inference", self.inference.stop, 0.5)
        if self.shadow is not None:
            # Never waited for: a shadow that is not ready only drops its work.
            await self.shadow.inference.start(wait_ready=False)
            stack.push_async_callback(stop_within, "shadow", self.shadow.inference.stop, 0.5)
        if ready_timeout_s is not None:
            try:
                await self.inference.wait_ready(ready_timeout_s)
            except InferenceUnavailable as exc:
                _log.warning("inference_not_ready", error=str(exc))


def _inference(
    inference: InferenceSettings, triton: TritonSettings, metrics: ReplicaMetrics | None
) -> InferenceClient:
    """The model backend (``inference.backend``) for the model ``triton`` names: the Triton gRPC
    client (any KServe v2 server) over the replicas, or the repository's model in this process.
    The live model and the shadow both come from here."""
    if inference.backend == "inprocess":
        return InProcessModerationClient(inference, triton, metrics=metrics)
    return TritonModerationClient(triton, metrics=metrics)


def _policy(
    settings: ModerationSettings, metrics: Metrics
) -> tuple[PolicyStage, PolicyWatcher | None]:
    """The thresholds in use (the policy file over the ``policy`` settings; a file that does
    not load stops the start, as a bad rule file does) and the file's watch."""
    f = settings.policy_file
    if f.path is None:
        return PolicyStage(settings.policy, metrics), None
    stage = PolicyStage(load_policy_file(f.path, settings.policy), metrics)
    watch = None
    if f.reload_interval_s > 0:
        watch = PolicyWatcher(
            f.path, f.reload_interval_s, settings.policy, stage.install, on_reject=stage.reject
        )
    return stage, watch


def _shadow(
    settings: ModerationSettings, metrics: Metrics, database: Database, policy: PolicyStage
) -> ShadowScorer | None:
    """The shadow scorer over its own client of the configured backend (its own breakers; no
    replica metrics, which are the live model's), or ``None`` without
    ``triton.shadow_model_name``."""
    t = settings.triton
    if not t.shadow_model_name:
        return None
    model = {"model_name": t.shadow_model_name, "model_version": t.shadow_model_version}
    return ShadowScorer(
        inference=_inference(settings.inference, t.model_copy(update=model), None),
        store=ShadowVerdictStore(database),
        policy=policy,
        metrics=metrics,
        queue_batches=t.shadow_queue_batches,
    )


def _rule_engine(rules: RulesSettings) -> RuleEngine:
    """The default stack's engine: ``rules.path`` (a rule file, or a layer over another) or the
    shipped set."""
    return RuleEngine(load_rule_stack(rules.path).ruleset if rules.path else default_ruleset())


def _tenant_rules(rules: RulesSettings, stage: RuleStage) -> TenantRulesWatcher | None:
    """The tenant folder's rules, loaded into ``stage`` now (a tenant file that does not load
    is refused and logged; the others and the default still start), and its watch; ``None``
    without ``rules.tenants_dir``."""
    if rules.tenants_dir is None:
        return None
    shelf = EngineShelf(rules.max_stacks)
    shelf.add(stage.engine)
    watch = TenantRulesWatcher(
        rules.tenants_dir,
        rules.reload_interval_s,
        stage,
        shelf,
        max_tenants=rules.max_tenants,
    )
    watch.load_all()
    return watch


def build_parts(
    settings: ModerationSettings,
    *,
    consumer_group: str,
    light_reset: bool = False,
    metrics: Metrics | None = None,
) -> ModerationParts:
    """The shared parts (nothing is started). ``consumer_group`` names the program in the
    verdict store's offsets; ``light_reset``: the pool sends no reset query on release (for a
    program that never changes session state, see ``engine.stores.database``)."""
    metrics = metrics or Metrics()
    database = Database(settings.postgres, light_reset=light_reset)
    outbox = VerdictOutboxStore(database)
    publisher = KafkaPublisher(settings.kafka)
    inference = _inference(settings.inference, settings.triton, metrics.replicas)
    rel = settings.reliability
    marks = CarriedMarks(outbox, wait_s=rel.published_mark_wait_s)
    rules = RuleStage(_rule_engine(settings.rules), metrics)
    policy, policy_watch = _policy(settings, metrics)
    tenant_watch = _tenant_rules(settings.rules, rules)
    watch = None
    if settings.rules.path is not None and settings.rules.reload_interval_s > 0:
        watch = RulesWatcher(
            settings.rules.path,
            settings.rules.reload_interval_s,
            rules.install,
            on_reject=rules.reject,
        )
    return ModerationParts(
        metrics=metrics,
        database=database,
        verdicts=VerdictBatchStore(database, consumer_group, marks),
        outbox=outbox,
        marks=marks,
        publisher=publisher,
        inference=inference,
        rules=rules,
        policy=policy,
        strikes=StrikeCache(StrikeStore(database), ttl_s=settings.rules.strikes_ttl_s),
        relay=VerdictOutbox(
            outbox,
            publisher,
            settings.kafka.verdict_topic,
            min_age_s=rel.outbox_min_age_s,
            batch_items=rel.outbox_batch_items,
            on_relayed=metrics.outbox_relayed_total.inc,
            on_backlog=metrics.outbox_backlog_records.set,
        ),
        rescorer=Rescorer(
            inference=inference,
            store=PendingTextStore(database),
            outbox=outbox,
            publisher=publisher,
            policy=policy,
            verdict_topic=settings.kafka.verdict_topic,
            batch_items=rel.rescore_batch_items,
            on_rescored=metrics.rescored_total.inc,
            on_rejected=metrics.rescore_rejected_total.inc,
        ),
        rules_watch=watch,
        tenant_rules_watch=tenant_watch if settings.rules.reload_interval_s > 0 else None,
        policy_watch=policy_watch,
        shadow=_shadow(settings, metrics, database, policy),
    )


def build_processor(
    parts: ModerationParts,
    settings: ModerationSettings,
    *,
    acknowledger: Acknowledger,
    positions: OffsetTracker | None,
    store: BatchStore | None = None,
    inference: Inference | None = None,
    failpoints: Failpoints | None = None,
    publish_every_s: float | None = None,
) -> BatchProcessor:
    """The batch processor over ``parts``: ``acknowledger`` is told of durable batches,
    ``positions`` is the stream's offset tracker (``None`` for a source without offsets);
    ``store`` writes where a program writes more than the verdicts (the online claims);
    ``inference`` wraps the parts' client where a program bounds it (the online budget);
    what was published is marked by ``parts.marks``, on the next verdict write; with
    ``publish_every_s`` stored verdicts are published by the program's clock
    (``BatchProcessor.publish_stored``), not by each batch."""
    return BatchProcessor(
        inference=inference or parts.inference,
        store=store or parts.verdicts,
        outbox=parts.marks,
        publisher=parts.publisher,
        acknowledger=acknowledger,
        positions=positions,
        policy=parts.policy,
        verdict_topic=settings.kafka.verdict_topic,
        metrics=parts.metrics,
        give_up=parts.give_up,
        failpoints=failpoints,
        shadow=parts.shadow,
        publish_every_s=publish_every_s,
    )


class StreamSource(Acknowledger, Protocol):
    """The Kafka source as the worker runs it (``worker.source.KafkaSource``)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def fetch(self, timeout_ms: int) -> list[tuple[Any, int]]: ...

    def owns(self, key: PartitionKey, epoch: int) -> bool: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def partitions_of(self, topic: str) -> list[int]: ...

    async def lag(self) -> dict[PartitionKey, int]: ...

    async def commit_all(self) -> None: ...


class StreamProcessor(Protocol):
    """The batch processor as the worker runs it (``worker.processing.BatchProcessor``)."""

    @property
    def store_healthy(self) -> bool: ...

    async def process_model_batch(self, batch: Batch[Work]) -> None: ...

    async def process_decided_batch(self, batch: Batch[Work]) -> None: ...


SourceFactory = Callable[
    [KafkaSettings, OffsetStore, OffsetTracker, Callable[[list[PartitionKey]], Any]], StreamSource
]
"""Makes the stream's source: (Kafka settings, stored offsets, tracker, on_revoke)."""


class ProcessorFactory(Protocol):
    def __call__(
        self,
        parts: ModerationParts,
        settings: ModerationSettings,
        *,
        acknowledger: Acknowledger,
        positions: OffsetTracker | None,
        failpoints: Failpoints | None = None,
    ) -> StreamProcessor: ...


@dataclass(slots=True)
class StreamParts:
    """Everything ``modstream worker`` runs. :func:`build_stream_parts` makes them."""

    moderation: ModerationParts
    tracker: OffsetTracker
    source: StreamSource
    processor: StreamProcessor
    lanes: Lanes[Work]
    backpressure: Backpressure
    failpoints: Failpoints
    loops: dict[str, Loop]
    """Background loops by name: the published marks no write carried, the outbox relay, the
    re-scorer, the breaker's probe, the consumer lag probe, the rule and policy file watches
    (when reloading is on), the analysts' rollup refresh (unless its interval is 0) and the
    shadow scorer (when there is one)."""


def build_stream_parts(
    settings: WorkerSettings,
    *,
    moderation: ModerationParts | None = None,
    make_source: SourceFactory = KafkaSource,
    make_processor: ProcessorFactory = build_processor,
) -> StreamParts:
    """The stream's parts over ``moderation`` (built from ``settings`` when not given);
    ``make_source`` and ``make_processor`` let a test hand in its own source and processor."""
    parts = moderation or build_parts(settings, consumer_group=settings.kafka.group_id)
    b = settings.batch
    tracker = OffsetTracker()
    lanes: Lanes[Work] | None = None

    async def on_revoke(keys: list[PartitionKey]) -> None:
        # The lanes exist by the time any partition is revoked (the source is not started yet).
        assert lanes is not None
        await drain_partitions(lanes, tracker, keys, settings.kafka.rebalance_timeout_ms / 2000.0)

    source = make_source(settings.kafka, parts.verdicts, tracker, on_revoke)
    failpoints = Failpoints(settings.failpoint)
    processor = make_processor(
        parts, settings, acknowledger=source, positions=tracker, failpoints=failpoints
    )
    # The lanes hold every record that may be in flight (the limit plus one fetch), so a put
    # never blocks the consume loop: backpressure is pause/resume, not a stall.
    queue_items = b.max_records_in_flight + settings.kafka.max_poll_records
    lanes = Lanes(
        model=Dispatcher(
            "model",
            processor.process_model_batch,
            slots=b.max_in_flight,
            max_items=b.max_items,
            max_wait_s=b.max_wait_s,
            queue_items=queue_items,
            # Below the upper bounds a batch closes once the model has nothing in flight, or
            # when its oldest message has waited target_latency_ms.
            target_latency_s=b.target_latency_ms / 1000.0 if b.target_latency_ms else None,
        ),
        decided=Dispatcher(
            "decided",
            processor.process_decided_batch,
            slots=1,
            max_items=b.max_items,
            max_wait_s=_DECIDED_WAIT_S,
            queue_items=queue_items,
            close_when_idle=False,
        ),
    )
    backpressure = Backpressure(
        b.max_records_in_flight, b.resume_ratio, high_bytes=b.max_bytes_in_flight
    )
    if parts.shadow is not None:
        model_lane = lanes.model
        parts.shadow.defer_to(lambda: model_lane.saturated or backpressure.paused)
    return StreamParts(
        moderation=parts,
        tracker=tracker,
        source=source,
        processor=processor,
        lanes=lanes,
        backpressure=backpressure,
        failpoints=failpoints,
        loops=_stream_loops(parts, settings, source, tracker),
    )


def _stream_loops(
    parts: ModerationParts, settings: WorkerSettings, source: StreamSource, tracker: OffsetTracker
) -> dict[str, Loop]:
    """The published marks no write carried (all of them once the batches are done), the relay
    and the re-scorer over the partitions this worker owns, the breaker's probe, the consumer
    lag probe, the rule file watch and the rollup refresh."""
    topic = settings.kafka.input_topic
    rel = settings.reliability

    def owned() -> Sequence[int]:
        return source.partitions_of(topic)

    loops: dict[str, Loop] = {
        "published_marks": parts.marks.run,
        "watch_breaker": functools.partial(watch_breaker, parts.inference, parts.metrics),
        "consumer_lag": ConsumerLagProbe(source, tracker, parts.metrics).run,
        "outbox": lambda done: parts.relay.run(done, rel.outbox_interval_s, topic, owned),
        "rescore": lambda done: parts.rescorer.run(
            done, rel.rescore_interval_s, parts.inference.probe, topic, owned
        ),
    }
    if parts.rules_watch is not None:
        loops["rules_watch"] = parts.rules_watch.run
    if parts.tenant_rules_watch is not None:
        loops["tenant_rules_watch"] = parts.tenant_rules_watch.run
    if settings.rollups.refresh_interval_s > 0:
        refresher = RollupRefresher(
            parts.database,
            interval_s=settings.rollups.refresh_interval_s,
            page_rows=settings.rollups.page_rows,
            metrics=parts.metrics,
        )
        loops["rollups"] = refresher.run
    if parts.policy_watch is not None:
        loops["policy_watch"] = parts.policy_watch.run
    if parts.shadow is not None:
        loops["shadow"] = parts.shadow.run
    return loops


@dataclass(slots=True)
class RescanParts:
    """What ``modstream rescan`` runs. :func:`build_rescan` makes them."""

    moderation: ModerationParts
    """Over the model the rescan scores with (no shadow, no watches)."""
    history: TopicHistory
    rescanner: Rescanner

    async def open(self, stack: AsyncExitStack, *, ready_timeout_s: float) -> None:
        """Start the shared parts (the model waited for) and the history reader."""
        await self.moderation.open(stack, ready_timeout_s=None)
        await self.moderation.inference.wait_ready(ready_timeout_s)
        await self.history.start()
        stack.push_async_callback(stop_within, "history", self.history.stop, 1.0)


def build_rescan(
    settings: WorkerSettings,
    *,
    model_name: str,
    model_version: str,
    rate: float,
    batch_items: int,
    topic: str | None = None,
) -> RescanParts:
    """The rescan of ``topic`` (default the input topic) with ``model_name`` at
    ``model_version`` (``""``: the server's latest), reading at most ``rate`` records a second
    in batches of ``batch_items``; the rules and policy are the live worker's, the strikes as
    they stood when each message was sent."""
    triton = settings.triton.model_copy(
        update={"model_name": model_name, "model_version": model_version, "shadow_model_name": ""}
    )
    scoped = settings.model_copy(update={"triton": triton})
    parts = build_parts(scoped, consumer_group=settings.kafka.group_id)
    history = TopicHistory(settings.kafka, topic or settings.kafka.input_topic)
    rescanner = Rescanner(
        history=history,
        store=RescanStore(parts.database),
        inference=parts.inference,
        rules=parts.rules,
        strikes=StrikeStore(parts.database),
        policy=parts.policy,
        publisher=parts.publisher,
        outbox=parts.marks,
        verdict_topic=settings.kafka.verdict_topic,
        throttle=TokenBucket(rate, burst=max(rate, float(batch_items))),
        batch_items=batch_items,
        max_message_bytes=settings.kafka.max_message_bytes,
        # This rescan's own unpublished rows, however recent: no other process writes them.
        relay=VerdictOutbox(
            parts.outbox,
            parts.publisher,
            settings.kafka.verdict_topic,
            min_age_s=0.0,
            batch_items=settings.reliability.outbox_batch_items,
        ),
        failpoints=Failpoints(settings.failpoint, names=RESCAN_FAILPOINT_NAMES),
        metrics=parts.metrics,
    )
    return RescanParts(moderation=parts, history=history, rescanner=rescanner)


async def stored_rescan(settings: WorkerSettings, rescan_id: uuid.UUID) -> RescanPlan | None:
    """The rescan ``rescan_id`` as last committed (``None``: no such rescan), read before its
    parts are built, since a resumed rescan scores with the model it was started with."""
    database = Database(settings.postgres)
    await database.start()
    try:
        return await RescanStore(database).load(rescan_id)
    finally:
        await database.stop()
