"""Micro-batching: a batch closes at ``max_items`` or ``max_wait_s`` after its first item.

Producers ``await put(item)``; the input queue is bounded, so a saturated pipeline pushes back on
the consumer loop instead of growing memory. ``batches()`` yields closed batches; ``flush()``
closes the open batch now (revocation, shutdown) and ``close()`` ends the iteration once drained.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Batch", "MicroBatcher"]

T = TypeVar("T")


class _Flush:
    """Marker: close the open batch now."""


class _Close:
    """Marker: close the open batch and stop iterating."""


@dataclass(frozen=True, slots=True)
class Batch(Generic[T]):
    items: list[T]
    opened_at: float
    """``time.monotonic()`` when the first item arrived."""
    reason: str
    """Why it closed: ``full``, ``timeout``, ``flush`` or ``close``."""


class MicroBatcher(Generic[T]):
    def __init__(
        self, max_items: int, max_wait_s: float, *, queue_items: int | None = None
    ) -> None:
        if max_items < 1 or max_wait_s <= 0:
            raise ValueError("max_items must be >= 1 and max_wait_s > 0")
        self.max_items = max_items
        self.max_wait_s = max_wait_s
        self._queue: asyncio.Queue[T | _Flush | _Close] = asyncio.Queue(
            maxsize=queue_items or 2 * max_items
        )

    async def put(self, item: T) -> None:
        await self._queue.put(item)

    async def flush(self) -> None:
        await self._queue.put(_Flush())

    async def close(self) -> None:
        await self._queue.put(_Close())

    def qsize(self) -> int:
        return self._queue.qsize()

    async def batches(self) -> AsyncIterator[Batch[T]]:
        closing = False
        while not closing:
            first = await self._queue.get()
            if isinstance(first, _Close):
                return
            if isinstance(first, _Flush):
                continue
            opened_at = time.monotonic()
            items: list[T] = [first]
            reason = "full"
            deadline = opened_at + self.max_wait_s
            while len(items) < self.max_items:
                try:
                    nxt = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    try:
                        async with asyncio.timeout_at(_loop_deadline(deadline)):
                            nxt = await self._queue.get()
                    except TimeoutError:
                        reason = "timeout"
                        break
                if isinstance(nxt, _Flush):
                    reason = "flush"
                    break
                if isinstance(nxt, _Close):
                    reason, closing = "close", True
                    break
                items.append(nxt)
            yield Batch(items, opened_at, reason)


def _loop_deadline(monotonic_deadline: float) -> float:
    """Translate a ``time.monotonic()`` deadline to the running loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())
