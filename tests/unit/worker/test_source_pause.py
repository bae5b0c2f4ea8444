"""Tests for KafkaSource.pause/resume: every assigned partition, and those assigned while paused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiokafka import TopicPartition

from common.settings import KafkaSettings
from engine.offsets import OffsetTracker
from worker.source import KafkaSource


class FakeConsumer:
    def __init__(self) -> None:
        self.assigned: set[TopicPartition] = set()
        self.paused: set[TopicPartition] = set()
        self.seeks: dict[TopicPartition, int] = {}

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks[tp] = offset

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.seeks[tp] = 0


class FakeStore:
    async def stored_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        return dict.fromkeys(partitions, 10)


async def _no_drain(_: Any) -> None:
    return None


def _source() -> tuple[KafkaSource, FakeConsumer]:
    source = KafkaSource(KafkaSettings(), FakeStore(), OffsetTracker(), _no_drain)
    consumer = FakeConsumer()
    source._consumer = consumer
    return source, consumer


async def test_pause_and_resume_cover_every_assigned_partition() -> None:
    """pause() pauses the whole assignment; resume() resumes it."""
    source, consumer = _source()
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    consumer.assigned.update(tps)
    await source._handle_assigned(tps)
    source.pause()
    assert source.paused
    assert consumer.paused == set(tps)
    source.resume()
    assert not source.paused
    assert consumer.paused == set()


async def test_partitions_assigned_while_paused_start_paused() -> None:
    """A rebalance during a pause must not resume fetching: new partitions are paused at once,
    after being positioned at their stored offsets."""
    source, consumer = _source()
    source.pause()
    tp = TopicPartition("t", 3)
    consumer.assigned.add(tp)
    await source._handle_assigned([tp])
    assert consumer.paused == {tp}
    assert consumer.seeks[tp] == 10
    assert source.partitions_of("t") == [3]
