"""The builder of the stream's parts and ``modstream rescan``'s, over the shared parts
(``engine.parts``): settings in, parts out, each part replaceable in tests.

- :func:`build_stream_parts` adds the stream's own (:class:`StreamParts`) to the shared parts
  (``engine.parts.build_parts``): the offset tracker, the Kafka source, the batch processor
  (``engine.parts.build_processor``) and its two lanes, and the background loops (the published
  marks no write carried among them).
- :func:`build_rescan` makes ``modstream rescan``'s (:class:`RescanParts`): the shared parts
  over the model to rescan with, the topic's history reader and the rescanner.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Protocol

from common.settings import KafkaSettings
from engine.batcher import Batch
from engine.dispatch import Dispatcher, Lanes
from engine.failpoints import RESCAN_FAILPOINT_NAMES, Failpoints
from engine.offsets import OffsetTracker, PartitionKey
from engine.outbox import VerdictOutbox
from engine.parts import ModerationParts, ModerationSettings, build_parts, build_processor
from engine.processing import Acknowledger
from engine.stores.database import Database
from engine.stores.strikes import StrikeStore
from engine.supervisor import Loop, stop_within
from engine.work import Work
from worker.backpressure import Backpressure
from worker.consume import drain_partitions
from worker.consumer_lag import ConsumerLagProbe
from worker.history import TopicHistory
from worker.rescan import Rescanner
from worker.rescan_plan import RescanPlan
from worker.rescan_store import RescanStore
from worker.rollup_refresh import RollupRefresher
from worker.settings import WorkerSettings
from worker.source import KafkaSource, OffsetStore
from worker.throttle import TokenBucket
from worker.watchers import watch_breaker

__all__ = [
    "RescanParts",
    "StreamParts",
    "StreamProcessor",
    "StreamSource",
    "build_rescan",
    "build_stream_parts",
    "stored_rescan",
]

_DECIDED_WAIT_S = 0.05
"""Rule blocks and dead letters need no model: their lane flushes almost at once."""


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
    """The batch processor as the worker runs it (``engine.processing.BatchProcessor``)."""

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
    if parts.tenant_policy_watch is not None:
        loops["tenant_policy_watch"] = parts.tenant_policy_watch.run
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
        # Marked at once: a rescan writes no verdict batches that could carry its marks, and
        # queued marks would die with the command (the changed rows would stay unpublished).
        outbox=parts.outbox,
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
