"""engine.dispatch: at most ``slots`` batches at once, idle lanes close batches at once, and a
failing batch is reported, cancels its siblings and raises."""

from __future__ import annotations

import asyncio

import pytest

from engine.batcher import Batch
from engine.dispatch import Dispatcher


class Handler:
    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s
        self.active = 0
        self.peak = 0
        self.batches: list[list[int]] = []
        self.cancelled = 0
        self.fail_on: int | None = None

    async def __call__(self, batch: Batch[int]) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay_s)
            if self.fail_on is not None and self.fail_on in batch.items:
                raise KeyError("boom")
            self.batches.append(batch.items)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1


async def test_no_more_than_slots_batches_run_at_once() -> None:
    """Twenty single-item batches through two slots: never more than two at once, all run."""
    handler = Handler()
    lane: Dispatcher[int] = Dispatcher(
        "model", handler, slots=2, max_items=1, max_wait_s=1.0, queue_items=100
    )
    running = asyncio.create_task(lane.run())
    for i in range(20):
        await lane.put(i)
    await lane.close()
    await asyncio.wait_for(running, 5)
    assert handler.peak == 2
    assert sorted(i for b in handler.batches for i in b) == list(range(20))
    assert lane.running == 0


async def test_an_idle_lane_closes_a_batch_without_waiting_for_max_wait() -> None:
    """With nothing running, a lone item is handled long before ``max_wait_s``."""
    handler = Handler(delay_s=0.0)
    lane: Dispatcher[int] = Dispatcher(
        "model", handler, slots=1, max_items=10, max_wait_s=5.0, queue_items=10
    )
    running = asyncio.create_task(lane.run())
    await lane.put(1)
    async with asyncio.timeout(1.0):
        while not handler.batches:  # noqa: ASYNC110 (the handler signals nothing)
            await asyncio.sleep(0.005)
    await lane.close()
    await running
    assert handler.batches == [[1]]


async def test_a_failing_batch_is_reported_and_cancels_the_others() -> None:
    """The failure hook hears (kind, exception, items) once; the lane raises a group."""
    handler = Handler(delay_s=0.05)
    handler.fail_on = 3
    reported: list[tuple[str, str, int]] = []
    lane: Dispatcher[int] = Dispatcher(
        "decided", handler, slots=4, max_items=1, max_wait_s=1.0, queue_items=10
    )
    running = asyncio.create_task(
        lane.run(lambda kind, exc, items: reported.append((kind, type(exc).__name__, items)))
    )
    for i in range(4):
        await lane.put(i)
    with pytest.raises(ExceptionGroup) as raised:
        await asyncio.wait_for(running, 5)
    assert raised.value.subgroup(KeyError) is not None
    assert reported == [("decided", "KeyError", 1)]
    assert handler.active == 0
