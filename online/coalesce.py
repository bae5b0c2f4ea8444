"""Concurrent single-item calls answered by one call over all of them (one PostgreSQL round trip).

Every online check needs a lookup of its own (its message-id claim, its sender's strikes). Made
one by one, each costs a pool checkout, a round trip, a server-side statement and the pool's
connection reset; under load that per-call work, not the model, fills the CPU. A
:class:`Coalescer` gathers the items asked for while the loop turns and, while ``max_in_flight``
calls are already running, until one ends, and hands them to ``run_many`` in one call (at most
``max_items``). Nothing waits on a timer: an idle coalescer runs an item on the next turn of the
loop, so a lone call pays no added latency.

``run_many`` returns one result per item, in order; if it raises, every caller of that call gets
the exception. A caller that goes away (cancelled) leaves the others unaffected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Coalescer"]

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    def __init__(
        self,
        run_many: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        *,
        max_items: int,
        max_in_flight: int,
    ) -> None:
        if max_items < 1 or max_in_flight < 1:
            raise ValueError("max_items and max_in_flight must be >= 1")
        self._run_many = run_many
        self._max_items = max_items
        self._max_in_flight = max_in_flight
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._running: set[asyncio.Task[None]] = set()
        self._scheduled = False
        self.calls = 0
        """Calls of ``run_many`` made so far (the mean group size is items / calls)."""

    async def __call__(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if not self._scheduled and len(self._running) < self._max_in_flight:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)
        return await future

    def _start(self) -> None:
        """Start calls for what is waiting, while a slot is free."""
        self._scheduled = False
        while self._waiting and len(self._running) < self._max_in_flight:
            group = self._waiting[: self._max_items]
            del self._waiting[: self._max_items]
            live = [(item, future) for item, future in group if not future.done()]
            if not live:
                continue
            task = asyncio.get_running_loop().create_task(self._run(live))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._waiting and not self._scheduled:
            self._start()

    async def _run(self, group: list[tuple[T, asyncio.Future[R]]]) -> None:
        self.calls += 1
        try:
            results = await self._run_many([item for item, _ in group])
            if len(results) != len(group):
                raise RuntimeError(f"run_many gave {len(results)} results for {len(group)} items")
        except asyncio.CancelledError:
            for _, future in group:
                future.cancel()
            raise
        except Exception as exc:
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():
                future.set_result(result)
