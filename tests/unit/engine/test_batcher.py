"""Tests for engine.batcher: size and time closing, flush, close, and back-pressure."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from engine.batcher import Batch, MicroBatcher


async def _next(it: AsyncIterator[Batch[int]]) -> Batch[int]:
    """The next batch, bounded in time so a broken batcher fails instead of hanging."""
    async with asyncio.timeout(2.0):
        return await anext(it)


async def test_closes_full_at_max_items() -> None:
    """A batch closes with reason "full" as soon as it holds max_items, the rest starts anew."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=3, max_wait_s=30.0, queue_items=10)
    for i in range(5):
        await batcher.put(i)
    it = batcher.batches()
    first = await _next(it)
    assert first.items == [0, 1, 2]
    assert first.reason == "full"
    await batcher.put(5)
    second = await _next(it)
    assert second.items == [3, 4, 5]
    assert second.reason == "full"


async def test_closes_on_timeout_with_fewer_items() -> None:
    """With fewer than max_items waiting, the batch closes after max_wait_s as "timeout"."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=0.05)
    await batcher.put(1)
    await batcher.put(2)
    batch = await _next(batcher.batches())
    assert batch.items == [1, 2]
    assert batch.reason == "timeout"


async def test_item_arriving_before_the_deadline_joins_the_batch() -> None:
    """An item put while the batch waits for its deadline joins that same batch."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=2, max_wait_s=5.0)
    it = batcher.batches()
    await batcher.put(1)
    pending = asyncio.ensure_future(_next(it))
    await asyncio.sleep(0.01)
    assert not pending.done()
    await batcher.put(2)
    batch = await pending
    assert batch.items == [1, 2]
    assert batch.reason == "full"


async def test_flush_closes_the_open_batch_early() -> None:
    """flush() closes the open batch now with reason "flush"; later items form a new batch."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0)
    await batcher.put(1)
    await batcher.put(2)
    await batcher.flush()
    await batcher.put(3)
    it = batcher.batches()
    batch = await _next(it)
    assert batch.items == [1, 2]
    assert batch.reason == "flush"
    await batcher.flush()
    assert (await _next(it)).items == [3]


async def test_flush_without_open_batch_yields_nothing() -> None:
    """A flush with nothing held produces no empty batch."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0)
    await batcher.flush()
    await batcher.put(7)
    await batcher.flush()
    batch = await _next(batcher.batches())
    assert batch.items == [7]


async def test_close_yields_held_items_then_ends() -> None:
    """close() yields what was held (reason "close") and then ends the iteration."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0)
    for i in range(3):
        await batcher.put(i)
    await batcher.close()
    async with asyncio.timeout(2.0):
        batches = [b async for b in batcher.batches()]
    assert [b.items for b in batches] == [[0, 1, 2]]
    assert batches[0].reason == "close"


async def test_close_when_idle_ends_iteration() -> None:
    """close() with nothing held ends the iteration without a batch."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0)
    await batcher.close()
    async with asyncio.timeout(2.0):
        batches = [b async for b in batcher.batches()]
    assert batches == []


async def test_put_blocks_when_queue_is_full() -> None:
    """Back-pressure: put() waits while the bounded queue is full and resumes once drained."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=2, max_wait_s=30.0, queue_items=2)
    await batcher.put(1)
    await batcher.put(2)
    blocked = asyncio.ensure_future(batcher.put(3))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    assert batcher.qsize() == 2
    batch = await _next(batcher.batches())
    assert batch.items == [1, 2]
    async with asyncio.timeout(2.0):
        await blocked
    assert batcher.qsize() == 1


@pytest.mark.parametrize(("max_items", "max_wait_s"), [(0, 1.0), (1, 0.0), (5, -1.0)])
def test_rejects_invalid_limits(max_items: int, max_wait_s: float) -> None:
    """max_items below 1 or a non-positive max_wait_s are refused."""
    with pytest.raises(ValueError, match="max_items"):
        MicroBatcher(max_items, max_wait_s)


async def test_idle_model_closes_the_batch_as_soon_as_nothing_waits() -> None:
    """With idle() true, a batch takes what is queued and closes at once as "idle"."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0, idle=lambda: True)
    for i in range(3):
        await batcher.put(i)
    batch = await _next(batcher.batches())
    assert (batch.items, batch.reason) == ([0, 1, 2], "idle")


async def test_busy_model_lets_the_batch_wait_for_more() -> None:
    """With a request in flight (idle() false), the batch waits and fills up as before."""
    busy = True
    batcher: MicroBatcher[int] = MicroBatcher(max_items=3, max_wait_s=30.0, idle=lambda: not busy)
    it = batcher.batches()
    await batcher.put(1)
    pending = asyncio.ensure_future(_next(it))
    await asyncio.sleep(0.02)
    assert not pending.done()
    await batcher.put(2)
    await batcher.put(3)
    assert (await pending).reason == "full"


async def test_target_latency_counts_time_spent_in_the_queue() -> None:
    """A batch closes when its oldest item reaches target_latency_s since it was put."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0, target_latency_s=0.2)
    await batcher.put(1)
    await asyncio.sleep(0.15)  # waiting in the queue counts
    loop = asyncio.get_running_loop()
    started = loop.time()
    batch = await _next(batcher.batches())
    assert batch.reason == "target"
    assert loop.time() - started < 0.15


def test_target_latency_must_be_positive() -> None:
    """A zero or negative target is refused."""
    with pytest.raises(ValueError, match="target_latency_s"):
        MicroBatcher(max_items=1, max_wait_s=1.0, target_latency_s=0)


async def test_spaced_batches_go_at_once_after_a_quiet_spell() -> None:
    """With spacing_s, the first batch (and any after a quiet spell) closes at once with
    what is queued: "spaced" when the spacing has passed, "sparse" when at the rate of the
    previous cycle no other item is due before it ends."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0, spacing_s=0.2)
    it = batcher.batches()
    await batcher.put(1)
    await batcher.put(2)
    first = await _next(it)
    assert (first.items, first.reason) == ([1, 2], "spaced")
    await asyncio.sleep(0.3)
    await batcher.put(3)
    quiet = await _next(it)  # 2 items in an endless first cycle: rate 0
    assert (quiet.items, quiet.reason) == ([3], "spaced")
    await asyncio.sleep(0.15)
    await batcher.put(4)
    loop = asyncio.get_running_loop()
    started = loop.time()
    sparse = await _next(it)  # 1 item in 0.3 s: none due within the 0.05 s left
    assert (sparse.items, sparse.reason) == ([4], "sparse")
    assert loop.time() - started < 0.03


async def test_spaced_batches_close_one_spacing_after_the_previous_one() -> None:
    """At a high rate, the next batch closes spacing_s after the previous one, with everything
    that arrived meanwhile (not spacing_s after its own first item)."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=10, max_wait_s=30.0, spacing_s=0.2)
    it = batcher.batches()
    await batcher.put(0)
    await _next(it)
    await batcher.put(1)
    assert (await _next(it)).reason == "sparse"  # the first cycle had no rate yet
    loop = asyncio.get_running_loop()
    closed = loop.time()  # that cycle: 1 item in almost no time, a high rate
    pending = asyncio.ensure_future(_next(it))
    await asyncio.sleep(0.1)
    await batcher.put(2)
    await asyncio.sleep(0.05)
    await batcher.put(3)
    batch = await pending
    assert (batch.items, batch.reason) == ([2, 3], "spaced")
    assert 0.18 <= loop.time() - closed < 0.3


async def test_spacing_never_holds_a_full_batch_nor_outlasts_max_wait() -> None:
    """A full batch closes at once; max_wait_s still bounds a spaced batch."""
    batcher: MicroBatcher[int] = MicroBatcher(max_items=2, max_wait_s=0.05, spacing_s=30.0)
    it = batcher.batches()
    await batcher.put(0)
    await _next(it)
    await batcher.put(1)
    await batcher.put(2)
    assert (await _next(it)).reason == "full"
    await batcher.put(3)
    assert (await _next(it)).reason == "timeout"


def test_spacing_must_be_positive() -> None:
    with pytest.raises(ValueError, match="spacing_s"):
        MicroBatcher(max_items=1, max_wait_s=1.0, spacing_s=0)
