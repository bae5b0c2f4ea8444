"""Micro-batching: a batch closes at ``max_items`` or ``max_wait_s`` after its first item.

Those are upper bounds. Two latency rules close a batch earlier:

- ``idle``: when nothing more is waiting and ``idle()`` says the model has no request in flight,
  the batch closes now (reason ``idle``): an idle model gains nothing from waiting, and under
  load requests are in flight, so batches fill up as before;
- ``target_latency_s``: a batch closes when its oldest item has waited that long since it was
  put (reason ``target``), time in the queue included.

With ``spacing_s`` a batch also closes as soon as ``spacing_s`` has passed since the previous
batch closed (reason ``spaced``): at once, with what is queued, when it has already passed; and
before that as soon as, at the rate items arrived during the previous batch's cycle, not one
more item is due by then (reason ``sparse``). Under load one batch goes every ``spacing_s`` or a
little sooner, carrying what arrived meanwhile; at a low rate, or after a quiet spell, an item
goes at once instead of waiting for company that is not coming (the online service's model
lane, ``online.collector``, where each batch costs a model call, a write and a publish).

Producers ``await put(item)``; the input queue is bounded, so a saturated pipeline pushes back on
the consumer loop instead of growing memory. ``batches()`` yields closed batches; ``flush()``
closes the open batch now (revocation, shutdown) and ``close()`` ends the iteration once drained.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
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
    """``time.monotonic()`` when the first item was put."""
    reason: str
    """Why it closed: ``full``, ``timeout``, ``idle``, ``target``, ``spaced``, ``sparse``,
    ``flush`` or ``close``."""


class MicroBatcher(Generic[T]):
    def __init__(
        self,
        max_items: int,
        max_wait_s: float,
        *,
        queue_items: int | None = None,
        target_latency_s: float | None = None,
        idle: Callable[[], bool] | None = None,
        spacing_s: float | None = None,
    ) -> None:
        if max_items < 1 or max_wait_s <= 0:
            raise ValueError("max_items must be >= 1 and max_wait_s > 0")
        if target_latency_s is not None and target_latency_s <= 0:
            raise ValueError("target_latency_s must be > 0 (or None)")
        if spacing_s is not None and spacing_s <= 0:
            raise ValueError("spacing_s must be > 0 (or None)")
        self.max_items = max_items
        self.max_wait_s = max_wait_s
        self.target_latency_s = target_latency_s
        self._idle = idle
        self.spacing_s = spacing_s
        self._closed_at = float("-inf")
        """``time.monotonic()`` when the previous batch closed (for ``spacing_s``)."""
        self._rate = 0.0
        """Items per second during the previous batch's cycle (for ``spacing_s``)."""
        self._queue: asyncio.Queue[tuple[float, T] | _Flush | _Close] = asyncio.Queue(
            maxsize=queue_items or 2 * max_items
        )

    async def put(self, item: T) -> None:
        await self._queue.put((time.monotonic(), item))

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
            opened_at, item = first
            items: list[T] = [item]
            reason = "full"
            deadline, late_reason = self._deadline(opened_at)
            while len(items) < self.max_items:
                try:
                    nxt = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    if self._idle is not None and self._idle():
                        reason = "idle"
                        break
                    now = time.monotonic()
                    if deadline <= now:
                        reason = late_reason  # spacing already passed: no wait at all
                        break
                    if late_reason == "spaced" and self._rate * (deadline - now) < 1.0:
                        reason = "sparse"  # no other item due before the spacing ends
                        break
                    try:
                        async with asyncio.timeout_at(_loop_deadline(deadline)):
                            nxt = await self._queue.get()
                    except TimeoutError:
                        reason = late_reason
                        break
                if isinstance(nxt, _Flush):
                    reason = "flush"
                    break
                if isinstance(nxt, _Close):
                    reason, closing = "close", True
                    break
                items.append(nxt[1])
            closed_at = time.monotonic()
            cycle = closed_at - self._closed_at
            self._rate = len(items) / cycle if cycle > 0 else 0.0
            self._closed_at = closed_at
            yield Batch(items, opened_at, reason)

    def _deadline(self, opened_at: float) -> tuple[float, str]:
        """When the batch opened at ``opened_at`` must close, and the reason it will give."""
        deadline, reason = opened_at + self.max_wait_s, "timeout"
        if self.target_latency_s is not None and opened_at + self.target_latency_s < deadline:
            deadline, reason = opened_at + self.target_latency_s, "target"
        if self.spacing_s is not None and self._closed_at + self.spacing_s < deadline:
            deadline, reason = self._closed_at + self.spacing_s, "spaced"
        return deadline, reason


def _loop_deadline(monotonic_deadline: float) -> float:
    """Translate a ``time.monotonic()`` deadline to the running loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_deadline - time.monotonic())
