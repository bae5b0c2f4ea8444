"""A window of a topic's history read back from Kafka: timestamps to offsets, then the records.

``modstream rescan`` (``worker.rescan``) reads the messages of a time window again, since their
text is not kept in PostgreSQL. :class:`TopicHistory` is a consumer outside any consumer group
(it commits nothing and takes no partition from the live workers):

- :meth:`TopicHistory.window` turns ``[since, until)`` into an offset range per partition with
  the consumer API's ``offsets_for_times``: from the first record stamped at or after ``since``
  up to the first stamped at or after ``until`` (the end of the log when there is none). Kafka
  timestamps are the producer's (``CreateTime``) unless the topic says otherwise.
- :meth:`TopicHistory.log_start` is each partition's first offset still held: records before it
  have left the topic (retention), and the rescan counts their verdicts as expired.
- :meth:`TopicHistory.assign` and :meth:`TopicHistory.fetch` read the ranges, never past their
  end; a partition is done once its position reaches the end (a gap left by compaction or a
  transaction marker counts as read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from common.kafka_client import kafka_security_kwargs
from common.settings import KafkaSettings
from worker.errors import WorkerError
from worker.rescan_plan import HistoryRecord, OffsetRange

__all__ = ["TopicHistory", "UnknownTopic"]


class UnknownTopic(WorkerError, LookupError):
    """The topic to read history from does not exist (or has no partitions)."""


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class TopicHistory:
    """Reads ``topic`` outside any consumer group (module docstring)."""

    def __init__(self, kafka: KafkaSettings, topic: str) -> None:
        self._kafka = kafka
        self.topic = topic
        self._consumer: Any = None
        self._ends: dict[int, int] = {}
        self.finished: set[int] = set()
        """The partitions of the assigned ranges read to their end (or empty from the start)."""

    async def start(self) -> None:
        k = self._kafka
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=k.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            # A seek below the log start (records removed meanwhile) resumes at the log start;
            # the rescan counts what was removed before it reads.
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=max(k.max_message_bytes * 2, 1_048_576),
            fetch_max_bytes=k.fetch_max_bytes,
            isolation_level="read_committed",
            **kafka_security_kwargs(k),
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    def _consumer_or_fail(self) -> Any:
        if self._consumer is None:
            raise RuntimeError("TopicHistory used before start()")
        return self._consumer

    async def partitions(self) -> list[TopicPartition]:
        consumer = self._consumer_or_fail()
        # The consumer's own metadata holds only what it was assigned; ``topics()`` fetches the
        # whole cluster's but answers only names, so the partitions come from that fetch itself.
        cluster = await consumer._client.fetch_all_metadata()
        ids = cluster.partitions_for_topic(self.topic)
        if not ids:
            raise UnknownTopic(f"topic {self.topic!r} does not exist or has no partitions")
        return [TopicPartition(self.topic, p) for p in sorted(ids)]

    async def window(self, since: datetime, until: datetime) -> list[OffsetRange]:
        """The offsets of ``[since, until)`` per partition (``start == end``: none there)."""
        consumer = self._consumer_or_fail()
        tps = await self.partitions()
        ends = await consumer.end_offsets(tps)
        firsts = await consumer.offsets_for_times({tp: _millis(since) for tp in tps})
        lasts = await consumer.offsets_for_times({tp: _millis(until) for tp in tps})
        ranges = []
        for tp in tps:
            end = lasts[tp].offset if lasts[tp] is not None else int(ends[tp])
            start = firsts[tp].offset if firsts[tp] is not None else int(ends[tp])
            ranges.append(OffsetRange(tp.partition, min(start, end), end))
        return ranges

    async def log_start(self) -> dict[int, int]:
        """Each partition's first offset the topic still holds."""
        consumer = self._consumer_or_fail()
        tps = await self.partitions()
        starts = await consumer.beginning_offsets(tps)
        return {tp.partition: int(offset) for tp, offset in starts.items()}

    def assign(self, ranges: Sequence[OffsetRange]) -> None:
        """Read ``ranges`` from their start (empty ranges are left out)."""
        consumer = self._consumer_or_fail()
        todo = [r for r in ranges if r.start < r.end]
        self._ends = {r.partition: r.end for r in todo}
        self.finished = {r.partition for r in ranges if r.start >= r.end}
        consumer.assign([TopicPartition(self.topic, r.partition) for r in todo])
        for r in todo:
            consumer.seek(TopicPartition(self.topic, r.partition), r.start)

    @property
    def done(self) -> bool:
        """Whether every assigned range has been read to its end."""
        return not self._ends

    async def fetch(self, max_records: int, timeout_ms: int = 1000) -> list[HistoryRecord]:
        """Up to ``max_records`` records of the ranges, in offset order per partition; finished
        partitions are dropped from the assignment."""
        consumer = self._consumer_or_fail()
        if not self._ends:
            return []
        fetched: Mapping[TopicPartition, list[Any]] = await consumer.getmany(
            timeout_ms=timeout_ms, max_records=max_records
        )
        records = []
        for tp, batch in fetched.items():
            end = self._ends.get(tp.partition)
            if end is None:
                continue
            records += [
                HistoryRecord(tp.partition, r.offset, r.value) for r in batch if r.offset < end
            ]
        await self._drop_finished()
        return records

    async def _drop_finished(self) -> None:
        """Pause the partitions whose position reached their end (pausing keeps the others'
        positions, which a new assignment would reset)."""
        consumer = self._consumer_or_fail()
        for partition, end in list(self._ends.items()):
            tp = TopicPartition(self.topic, partition)
            if await consumer.position(tp) >= end:
                consumer.pause(tp)
                del self._ends[partition]
                self.finished.add(partition)
