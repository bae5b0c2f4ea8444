"""common.grouping: concurrent calls share one run; an idle call runs at once; failures and
cancellations reach exactly the items they concern."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from common.grouping import GroupedCall


class Step:
    """Doubles each item after ``delay_s``; records every group it ran."""

    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s
        self.groups: list[list[int]] = []
        self.failing: set[int] = set()
        """A group holding one of these items raises."""
        self.gate: asyncio.Event | None = None

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(self.delay_s)
        if self.failing.intersection(items):
            raise RuntimeError("store down")
        return [2 * i for i in items]


async def test_a_lone_call_runs_at_once_in_a_group_of_one() -> None:
    """With nothing running, the call is its own group and waits for no timer."""
    step = Step(delay_s=0.0)
    grouped = GroupedCall(step)
    started = asyncio.get_running_loop().time()
    assert await grouped(21) == 42
    assert step.groups == [[21]]
    assert asyncio.get_running_loop().time() - started < 0.05


async def test_calls_arriving_during_a_run_go_together_in_the_next() -> None:
    """While one run is in flight, the calls that come meanwhile are one group, in order, and
    each gets its own result."""
    step = Step()
    grouped = GroupedCall(step)
    first = asyncio.create_task(grouped(1))
    await asyncio.sleep(0.005)  # the first run is in flight
    rest = [asyncio.create_task(grouped(i)) for i in range(2, 7)]
    results = await asyncio.gather(first, *rest)
    assert results == [2, 4, 6, 8, 10, 12]
    assert step.groups == [[1], [2, 3, 4, 5, 6]]
    assert (grouped.runs, grouped.items) == (2, 6)


async def test_max_items_splits_a_long_queue_into_several_runs() -> None:
    """No run takes more than ``max_items``; every item is still answered."""
    step = Step()
    grouped = GroupedCall(step, max_items=2)
    first = asyncio.create_task(grouped(0))
    await asyncio.sleep(0.005)
    rest = [asyncio.create_task(grouped(i)) for i in range(1, 6)]
    assert await asyncio.gather(first, *rest) == [0, 2, 4, 6, 8, 10]
    assert max(len(g) for g in step.groups) <= 2
    assert sorted(i for g in step.groups for i in g) == list(range(6))


async def test_a_failing_run_fails_its_items_only() -> None:
    """The exception reaches every item of the failed group; the next group is unaffected."""
    step = Step()
    step.failing = {2}
    grouped = GroupedCall(step)
    first = asyncio.create_task(grouped(1))
    await asyncio.sleep(0.005)
    failed = [asyncio.create_task(grouped(i)) for i in (2, 3)]
    await asyncio.sleep(0.03)  # the second group [2, 3] is running
    later = asyncio.create_task(grouped(4))
    assert await first == 2
    for task in failed:
        with pytest.raises(RuntimeError, match="store down"):
            await task
    assert await later == 8
    assert step.groups == [[1], [2, 3], [4]]


async def test_a_cancelled_runner_hands_its_groups_other_items_to_the_next_turn() -> None:
    """The caller running a group is cancelled mid-run: the others' items are run again by the
    next caller, the cancelled caller's own item is dropped, and nothing hangs."""
    step = Step(delay_s=0.0)
    step.gate = asyncio.Event()
    grouped = GroupedCall(step)
    runner = asyncio.create_task(grouped(1))
    await asyncio.sleep(0.005)
    waiting = [asyncio.create_task(grouped(i)) for i in (2, 3)]
    await asyncio.sleep(0.005)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    step.gate.set()
    assert await asyncio.wait_for(asyncio.gather(*waiting), 1.0) == [4, 6]
    assert step.groups == [[1], [2, 3]]


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    """A caller cancelled before its item was taken is not run at all."""
    step = Step()
    grouped = GroupedCall(step)
    first = asyncio.create_task(grouped(1))
    await asyncio.sleep(0.005)
    gone = asyncio.create_task(grouped(2))
    stays = asyncio.create_task(grouped(3))
    await asyncio.sleep(0)
    gone.cancel()
    assert await first == 2
    assert await stays == 6
    assert step.groups == [[1], [3]]


async def test_an_answered_caller_returns_without_waiting_for_the_next_run() -> None:
    """A caller answered by another's run returns when that run ends, not after the run that
    started next."""
    step = Step(delay_s=0.05)
    grouped = GroupedCall(step)
    first = asyncio.create_task(grouped(1))
    await asyncio.sleep(0.005)
    second, third = asyncio.create_task(grouped(2)), asyncio.create_task(grouped(3))
    await first
    await asyncio.sleep(0.005)  # the run [2, 3] is going
    fourth = asyncio.create_task(grouped(4))
    await asyncio.wait({second, third})
    assert not fourth.done()  # [2, 3] answered while [4] still had to run
    assert await fourth == 8
    assert step.groups == [[1], [2, 3], [4]]
