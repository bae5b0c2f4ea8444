"""The Kafka source: a manual-commit consumer that seeks to the offsets stored in Postgres.

On assignment each partition is positioned at the ``next_offset`` its last verdict transaction
stored (Postgres is the source of truth); on revocation the owner's ``on_revoke`` drains what is
in flight before the partitions go. Commits to Kafka are explicit per partition (never a bare
``commit()``), serialised, and skipped while a rebalance is running. The source is the batch
processor's ``Acknowledger``: once a batch is durable, :meth:`KafkaSource.durable` commits its
partitions' durable points.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from common.kafka_client import kafka_security_kwargs
from common.logs import get_logger
from engine.offsets import OffsetTracker, PartitionKey
from engine.retry import backoff_s
from engine.settings import KafkaSettings
from engine.stores.verdict_batches import VerdictBatch
from engine.work import Work

__all__ = ["KafkaSource", "OffsetStore"]

_log = get_logger(__name__)


class OffsetStore(Protocol):
    async def stored_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]: ...


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._source._handle_revoked([(tp.topic, tp.partition) for tp in revoked])

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._source._handle_assigned(list(assigned))


class KafkaSource:
    def __init__(
        self,
        settings: KafkaSettings,
        store: OffsetStore,
        tracker: OffsetTracker,
        on_revoke: Callable[[list[PartitionKey]], Awaitable[None]],
    ) -> None:
        self._settings = settings
        self._store = store
        self._tracker = tracker
        self._on_revoke = on_revoke
        self._consumer: AIOKafkaConsumer | None = None
        self._commit_lock = asyncio.Lock()
        self._rebalancing = False
        self._assigned: set[PartitionKey] = set()
        self._epochs: dict[PartitionKey, int] = {}
        self._next_epoch = 0
        self._paused = False
        self._assigned_at: dict[PartitionKey, int] = {}
        """The offset each partition was positioned at on assignment (when it was stored)."""

    @property
    def paused(self) -> bool:
        return self._paused

    def partitions_of(self, topic: str) -> list[int]:
        """Assigned partition numbers of ``topic`` (for per-partition background work)."""
        return sorted(p for t, p in self._assigned if t == topic)

    def pause(self) -> None:
        """Stop fetching every assigned partition (and those assigned later) until ``resume``.

        Keep calling :meth:`fetch`: it returns nothing for paused partitions but keeps the
        consumer polling, so it stays in the group.
        """
        self._paused = True
        if self._consumer is not None:
            self._consumer.pause(*self._consumer.assignment())

    def resume(self) -> None:
        self._paused = False
        if self._consumer is not None:
            self._consumer.resume(*self._consumer.assignment())

    def owns(self, key: PartitionKey, epoch: int) -> bool:
        """True while the partition is still assigned in the assignment ``epoch`` of a fetch.

        Records are only processed when their partition was assigned *and positioned at its
        stored offset* when the fetch returned, and still is: the fetcher may hand out records
        while the assignment callback is reading Postgres, or after a revocation began, and such
        records must not be processed (they are read again after the seek).
        """
        return self._epochs.get(key) == epoch

    async def start(self) -> None:
        if self._consumer is not None:
            return
        s = self._settings
        consumer = AIOKafkaConsumer(
            bootstrap_servers=s.bootstrap_servers,
            group_id=s.group_id,
            group_instance_id=s.group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=s.max_poll_records,
            fetch_max_bytes=s.fetch_max_bytes,
            max_partition_fetch_bytes=max(s.max_message_bytes * 2, 1_048_576),
            session_timeout_ms=s.session_timeout_ms,
            rebalance_timeout_ms=s.rebalance_timeout_ms,
            heartbeat_interval_ms=max(1000, s.session_timeout_ms // 10),
            **kafka_security_kwargs(s),
        )
        await consumer.start()
        consumer.subscribe(topics=[s.input_topic], listener=_Listener(self))
        self._consumer = consumer

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    async def fetch(self, timeout_ms: int) -> list[tuple[Any, int]]:
        """Records of partitions we own, each with the assignment epoch it was fetched in."""
        if self._consumer is None:
            return []
        fetched: Mapping[Any, list[Any]] = await self._consumer.getmany(
            timeout_ms=timeout_ms, max_records=self._settings.max_poll_records
        )
        # Snapshot ownership at the instant the fetch returned (no await in between).
        out: list[tuple[Any, int]] = []
        for tp, records in fetched.items():
            epoch = self._epochs.get((tp.topic, tp.partition))
            if epoch is not None:
                out.extend((record, epoch) for record in records)
        return out

    async def lag(self) -> dict[PartitionKey, int]:
        """Records of each assigned partition not yet durably handled: the partition's end
        offset, asked of the broker (the fetcher's high watermark goes stale while a partition
        is paused), minus the offset this worker would commit next. A partition with nothing
        fetched yet counts from where it was positioned (its stored offset, or its beginning).
        Raises ``KafkaError`` when the broker cannot answer."""
        consumer = self._consumer
        keys = sorted(self._assigned)
        if consumer is None or not keys:
            return {}
        ends = await consumer.end_offsets([TopicPartition(t, p) for t, p in keys])
        starts: dict[PartitionKey, int] = {}
        unknown: list[TopicPartition] = []
        for key in keys:
            point = self._tracker.durable_point(key)
            if point is None:
                point = self._assigned_at.get(key)
            if point is None:
                unknown.append(TopicPartition(*key))
            else:
                starts[key] = point
        if unknown:
            for tp, first in (await consumer.beginning_offsets(unknown)).items():
                starts[(tp.topic, tp.partition)] = first
        return {
            (tp.topic, tp.partition): max(0, end - starts[(tp.topic, tp.partition)])
            for tp, end in ends.items()
            if (tp.topic, tp.partition) in starts and (tp.topic, tp.partition) in self._assigned
        }

    async def commit(self, points: Mapping[PartitionKey, int | None]) -> None:
        """Commit ``points`` for partitions still assigned; best effort (Postgres is the truth)."""
        if self._consumer is None or self._rebalancing:
            return
        async with self._commit_lock:
            await self._commit_locked(points)

    async def _commit_locked(self, points: Mapping[PartitionKey, int | None]) -> None:
        if self._consumer is None:
            return
        offsets = {
            TopicPartition(k[0], k[1]): p
            for k, p in points.items()
            if p is not None and k in self._assigned
        }
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            _log.warning("kafka_commit_skipped", error=type(exc).__name__)

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        """A batch's records are stored: commit their partitions up to the durable points."""
        keys = {work.partition_key for work in works}
        await self.commit({key: self._tracker.durable_point(key) for key in keys})

    async def commit_all(self) -> None:
        """Commit every assigned partition's durable point (shutdown)."""
        await self.commit({k: self._tracker.durable_point(k) for k in self._assigned})

    async def _handle_revoked(self, keys: list[PartitionKey]) -> None:
        self._rebalancing = True
        for key in keys:
            self._epochs.pop(key, None)  # stop processing their fetched records at once
        _log.info("partitions_revoked", partitions=[f"{t}-{p}" for t, p in keys])
        await self._on_revoke(keys)
        async with self._commit_lock:
            await self._commit_locked({k: self._tracker.durable_point(k) for k in keys})
        for key in keys:
            self._tracker.forget(key)
            self._assigned.discard(key)
            self._assigned_at.pop(key, None)

    async def _assigned_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._store.stored_offsets(topic, partitions)
            except Exception as exc:  # the store wraps its errors; any failure means retry
                _log.warning("stored_offsets_unavailable", error=type(exc).__name__)
                await asyncio.sleep(backoff_s(attempt, 0.5, 5.0))

    async def _handle_assigned(self, tps: list[TopicPartition]) -> None:
        try:
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            for topic, partitions in by_topic.items():
                stored = await self._assigned_offsets(topic, partitions)
                for partition in partitions:
                    key = (topic, partition)
                    tp = TopicPartition(topic, partition)
                    self._tracker.forget(key)
                    # Always seek: records the fetcher returned before this point (from Kafka's
                    # committed position) were dropped by ``owns()`` and are read again here.
                    self._assigned_at.pop(key, None)
                    if self._consumer is not None:
                        if partition in stored:
                            self._consumer.seek(tp, stored[partition])
                            self._assigned_at[key] = stored[partition]
                        else:
                            await self._consumer.seek_to_beginning(tp)
                    if self._consumer is not None and self._paused:
                        self._consumer.pause(tp)
                    self._assigned.add(key)
                    self._next_epoch += 1
                    self._epochs[key] = self._next_epoch
            _log.info(
                "partitions_assigned",
                partitions=[f"{tp.topic}-{tp.partition}" for tp in tps],
            )
        finally:
            self._rebalancing = False
