"""online.paced_publishing over the daemon's BatchProcessor (``publish_every_s``): batches end
once durable, their verdicts go to Kafka as one publish per turn, and whatever is left is
published and marked when the service stops."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from engine.batcher import Batch
from engine.metrics import Metrics
from engine.policy_stage import PolicyStage
from engine.processing import BatchProcessor
from engine.stores.carried_marks import CarriedMarks
from online.answers import PendingAnswers
from online.paced_publishing import PacedPublishing
from pipelines.policy import PolicyThresholds
from pipelines.verdict_codec import VerdictRowKey
from tests.unit.online.online_fakes import FakeModel, FakePublisher, FakeStore, work


class Outbox:
    """The verdict outbox as the marks use it: records each lone mark."""

    def __init__(self) -> None:
        self.marked: list[list[VerdictRowKey]] = []

    async def mark_published(self, keys: Sequence[VerdictRowKey]) -> None:
        self.marked.append(list(keys))


def _processor(publisher: FakePublisher, marks: CarriedMarks) -> BatchProcessor:
    return BatchProcessor(
        inference=FakeModel(),
        store=FakeStore(),
        outbox=marks,
        publisher=publisher,
        acknowledger=PendingAnswers(),
        positions=None,
        policy=PolicyStage(PolicyThresholds()),
        verdict_topic="moderation.verdicts",
        metrics=Metrics(),
        give_up=asyncio.Event(),
        publish_every_s=30.0,
    )


def _batch(*offsets: int) -> Batch[Any]:
    return Batch([work(o, f"hello number {o}") for o in offsets], 0.0, "full")


async def test_batches_end_unpublished_and_one_publish_sends_them_all() -> None:
    publisher, outbox = FakePublisher(), Outbox()
    marks = CarriedMarks(outbox)
    processor = _processor(publisher, marks)
    await processor.process_model_batch(_batch(1, 2))
    await processor.process_model_batch(_batch(3))
    assert publisher.records == []
    await processor.publish_stored()
    assert len(publisher.records) == 3
    assert sorted(key[0].offset for key in marks.take()) == [1, 2, 3]  # queued for a write
    await processor.publish_stored()
    assert len(publisher.records) == 3  # nothing new: no publish


async def test_the_loop_publishes_on_its_clock_and_everything_at_the_end() -> None:
    publisher, outbox = FakePublisher(), Outbox()
    marks = CarriedMarks(outbox, wait_s=30.0)
    processor = _processor(publisher, marks)
    loop = PacedPublishing(processor.publish_stored, marks, every_s=0.01)
    done = asyncio.Event()
    running = asyncio.create_task(loop.run(done))
    await processor.process_model_batch(_batch(1))
    for _ in range(100):
        if publisher.records:
            break
        await asyncio.sleep(0.01)
    assert len(publisher.records) == 1
    assert outbox.marked == []  # the mark waits for a write to carry it
    await processor.process_model_batch(_batch(2))
    done.set()
    await asyncio.wait_for(running, 5)
    assert len(publisher.records) == 2
    assert [sorted(k[0].offset for k in keys) for keys in outbox.marked] == [[1, 2]]


def test_the_clock_must_tick() -> None:
    with pytest.raises(ValueError, match="every_s"):
        PacedPublishing(lambda: asyncio.sleep(0), CarriedMarks(Outbox()), every_s=0)
