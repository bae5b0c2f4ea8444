"""The stream's consume loop: fetch, decode, strikes, rules, route to a lane; pause under load.

Each fetched record is registered with the offset tracker (so nothing commits past it until it
is durable) and decoded; records that cannot be decoded go to the ``decided`` lane as dead
letters. The moderators' strikes of a fetch's senders are looked up once, then each message is
evaluated by the rule stage (one canonical text for rules and model): a decisive rule outcome
goes to the ``decided`` lane, everything else to the ``model`` lane. Records of a partition
revoked since their fetch are skipped (they are read again by the new owner).

Backpressure is pause/resume, never a stall: at ``max_records_in_flight`` records (or bytes) not
yet durable the partitions are paused, and polling goes on so the consumer stays in its group.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from common.logs import get_logger
from engine.dispatch import Lanes
from engine.failpoints import Failpoints
from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey
from engine.rule_stage import RuleStage
from engine.sender_strikes import strike_key
from engine.work import Work
from pipelines.decode import DecodeError, decode_message
from pipelines.messages import ChatMessage, SourcePosition
from worker.backpressure import Backpressure, FlowAction

__all__ = ["ConsumeLoop", "RecordSource", "Strikes", "drain_partitions"]

_log = get_logger(__name__)
_FETCH_TIMEOUT_MS = 500
_YIELD_EVERY_RECORDS = 64


class RecordSource(Protocol):
    """The Kafka source as the consume loop uses it (``worker.source.KafkaSource``)."""

    async def fetch(self, timeout_ms: int) -> list[tuple[Any, int]]: ...

    def owns(self, key: PartitionKey, epoch: int) -> bool: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class Strikes(Protocol):
    """Moderators' strikes per sender (``engine.sender_strikes.StrikeCache``)."""

    async def prefetch(self, sender_ids: Iterable[str]) -> None: ...

    def enrich(self, message: ChatMessage) -> ChatMessage: ...


def _timestamp_s(record: Any) -> float | None:
    """The record's Kafka timestamp in epoch seconds (``None`` when it has none)."""
    timestamp = getattr(record, "timestamp", None)
    return timestamp / 1000.0 if isinstance(timestamp, int) and timestamp >= 0 else None


class ConsumeLoop:
    def __init__(
        self,
        *,
        source: RecordSource,
        tracker: OffsetTracker,
        strikes: Strikes,
        rules: RuleStage,
        lanes: Lanes[Work],
        backpressure: Backpressure,
        failpoints: Failpoints,
        metrics: Metrics,
        max_message_bytes: int,
        failed: Callable[[], bool],
    ) -> None:
        self._source = source
        self._tracker = tracker
        self._strikes = strikes
        self._rules = rules
        self._lanes = lanes
        self._backpressure = backpressure
        self._failpoints = failpoints
        self._metrics = metrics
        self._max_bytes = max_message_bytes
        self._failed = failed
        """Whether a task of the worker failed: fetching stops at once."""

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` (or a failure); the lanes are closed on the way out."""
        source = self._source
        try:
            while not stop.is_set() and not self._failed():
                self._apply_backpressure()
                fetched = await source.fetch(_FETCH_TIMEOUT_MS)
                if fetched:
                    self._failpoints.hit("after_fetch")
                works = [
                    (self._decode(record), epoch)
                    for record, epoch in fetched
                    if source.owns((record.topic, record.partition), epoch)
                ]
                # One look-up of moderators' strikes for this fetch's senders (cached).
                await self._strikes.prefetch(strike_key(w.message) for w, _ in works if w.message)
                for handled, (work, epoch) in enumerate(works, start=1):
                    if not source.owns(work.partition_key, epoch):
                        continue  # revoked (or re-assigned) since this fetch returned
                    await self._route(work)
                    if handled % _YIELD_EVERY_RECORDS == 0:
                        await asyncio.sleep(0)  # let heartbeats and batches run
                    if stop.is_set() or self._failed():
                        break
        finally:
            await self._lanes.decided.close()
            await self._lanes.model.close()

    def _decode(self, record: Any) -> Work:
        """Register the record with the offset tracker and decode it (errors are kept)."""
        position = SourcePosition(record.topic, record.partition, record.offset)
        size_bytes = len(record.value or b"") + len(record.key or b"")
        self._tracker.start((record.topic, record.partition), record.offset, size_bytes)
        self._metrics.records_total.inc()
        work = Work(position, record.key, time.monotonic(), produced_at=_timestamp_s(record))
        try:
            work.message = decode_message(record.value, max_bytes=self._max_bytes)
        except DecodeError as exc:
            work.error, work.raw = exc, record.value
        return work

    async def _route(self, work: Work) -> None:
        """Dead letters and rule blocks to the decided lane, the rest to the model lane."""
        if work.message is None:
            await self._lanes.decided.put(work)
            return
        work.message = self._strikes.enrich(work.message)
        work.outcome, work.model_text = self._rules.evaluate(work.message)
        self._failpoints.hit("after_rules")
        if work.outcome.is_decisive:
            await self._lanes.decided.put(work)
        else:
            await self._lanes.model.put(work)

    def _apply_backpressure(self) -> None:
        in_flight = self._tracker.in_flight()
        in_flight_bytes = self._tracker.in_flight_bytes()
        self._metrics.in_flight_records.set(in_flight)
        self._metrics.in_flight_bytes.set(in_flight_bytes)
        action = self._backpressure.update(in_flight, in_flight_bytes)
        if action is FlowAction.PAUSE:
            self._source.pause()
            self._metrics.consumer_paused.set(1)
            _log.warning("consumer_paused", in_flight=in_flight, in_flight_bytes=in_flight_bytes)
        elif action is FlowAction.RESUME:
            self._source.resume()
            self._metrics.consumer_paused.set(0)
            _log.info("consumer_resumed", in_flight=in_flight)


async def drain_partitions(
    lanes: Lanes[Work], tracker: OffsetTracker, keys: Sequence[PartitionKey], timeout_s: float
) -> None:
    """Revocation: flush the lanes and wait (at most ``timeout_s``) for those partitions'
    records to become durable."""
    await lanes.decided.flush()
    await lanes.model.flush()
    deadline = time.monotonic() + timeout_s
    # Polling is deliberate: completion is spread over many batch tasks and partitions.
    while tracker.pending_in(keys) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    if tracker.pending_in(keys):
        _log.warning("revoke_with_records_in_flight", records=tracker.pending_in(keys))
