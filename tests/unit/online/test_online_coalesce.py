"""online.coalesce: concurrent calls grouped into one, results and errors handed back in order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from online.coalesce import Coalescer


class Recorder:
    """``run_many`` that doubles its items and remembers each group it was given."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.groups: list[list[int]] = []
        self.delay_s = delay_s

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        await asyncio.sleep(self.delay_s)
        return [2 * i for i in items]


async def test_calls_of_one_loop_turn_are_one_group() -> None:
    run = Recorder()
    coalescer = Coalescer(run, max_items=100, max_in_flight=1)
    results = await asyncio.gather(*(coalescer(i) for i in range(10)))
    assert results == [2 * i for i in range(10)]
    assert run.groups == [list(range(10))]
    assert coalescer.calls == 1


async def test_calls_arriving_while_one_runs_wait_and_go_together() -> None:
    run = Recorder(delay_s=0.02)
    coalescer = Coalescer(run, max_items=100, max_in_flight=1)
    first = asyncio.ensure_future(coalescer(0))
    await asyncio.sleep(0.005)  # the first group is running now
    later = [asyncio.ensure_future(coalescer(i)) for i in range(1, 6)]
    assert await asyncio.gather(first, *later) == [0, 2, 4, 6, 8, 10]
    assert run.groups == [[0], [1, 2, 3, 4, 5]]


async def test_groups_are_cut_at_max_items_and_run_side_by_side() -> None:
    run = Recorder(delay_s=0.01)
    coalescer = Coalescer(run, max_items=3, max_in_flight=2)
    results = await asyncio.gather(*(coalescer(i) for i in range(7)))
    assert results == [2 * i for i in range(7)]
    assert run.groups == [[0, 1, 2], [3, 4, 5], [6]]


async def test_a_lone_call_is_not_delayed_by_a_timer() -> None:
    coalescer = Coalescer(Recorder(), max_items=100, max_in_flight=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await coalescer(21) == 42
    assert loop.time() - started < 0.005


async def test_an_error_reaches_every_caller_of_its_group_only() -> None:
    async def run(items: Sequence[int]) -> list[int]:
        if 3 in items:
            raise OSError("down")
        return list(items)

    coalescer = Coalescer(run, max_items=2, max_in_flight=2)
    results = await asyncio.gather(*(coalescer(i) for i in range(4)), return_exceptions=True)
    assert results[:2] == [0, 1]
    assert all(isinstance(r, OSError) for r in results[2:])


async def test_a_wrong_number_of_results_is_an_error() -> None:
    async def run(items: Sequence[int]) -> list[int]:
        return [0]

    coalescer = Coalescer(run, max_items=10, max_in_flight=1)
    with pytest.raises(RuntimeError, match="1 results for 2 items"):
        await asyncio.gather(coalescer(1), coalescer(2))


async def test_a_cancelled_caller_leaves_the_others_their_answer() -> None:
    run = Recorder(delay_s=0.01)
    coalescer = Coalescer(run, max_items=10, max_in_flight=1)
    gone = asyncio.ensure_future(coalescer(1))
    kept = asyncio.ensure_future(coalescer(2))
    await asyncio.sleep(0)
    gone.cancel()
    assert await kept == 4
    assert gone.cancelled()


async def test_a_caller_cancelled_before_its_turn_is_not_run() -> None:
    run = Recorder(delay_s=0.01)
    coalescer = Coalescer(run, max_items=10, max_in_flight=1)
    busy = asyncio.ensure_future(coalescer(1))
    await asyncio.sleep(0.002)
    gone = asyncio.ensure_future(coalescer(2))
    kept = asyncio.ensure_future(coalescer(3))
    await asyncio.sleep(0)
    gone.cancel()
    assert await asyncio.gather(busy, kept) == [2, 6]
    assert run.groups == [[1], [3]]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        Coalescer(Recorder(), max_items=0, max_in_flight=1)
