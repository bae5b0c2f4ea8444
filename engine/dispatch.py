"""A lane of batches: a micro-batcher and the tasks that run its closed batches, a few at once.

Both services route work into two lanes: ``model`` (needs the model) and ``decided`` (rule blocks
and dead letters). :meth:`Dispatcher.run` takes each closed batch, waits for one of ``slots``,
and runs ``handle(batch)`` as a task of one ``TaskGroup``; it returns once the batcher is closed
and every batch has finished. A batch that raises is reported to ``on_failure`` (kind, exception,
items) and the group cancels the lane's other batches and raises: nothing is left running, no
exception is lost.

With ``close_when_idle`` a batch closes as soon as nothing more is queued and the lane has no
batch running (an idle model gains nothing from waiting); ``running`` counts a batch from the
moment it is handed off, so the next batch never sees a just-closed one as idle. With
``spacing_s`` (``engine.batcher``) batches close at a steady pace under load instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from engine.batcher import Batch, MicroBatcher

__all__ = ["Dispatcher", "FailureHook", "Lanes"]

T = TypeVar("T")

FailureHook = Callable[[str, Exception, int], None]
"""Told of a batch that raised: the lane's kind, the exception, the batch's item count."""


class Dispatcher(Generic[T]):
    def __init__(
        self,
        kind: str,
        handle: Callable[[Batch[T]], Awaitable[None]],
        *,
        slots: int,
        max_items: int,
        max_wait_s: float,
        queue_items: int,
        target_latency_s: float | None = None,
        close_when_idle: bool = True,
        spacing_s: float | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.kind = kind
        self._handle = handle
        self._slots = slots
        self.running = 0
        """Batches handed off and not yet finished."""
        self.batcher: MicroBatcher[T] = MicroBatcher(
            max_items,
            max_wait_s,
            queue_items=queue_items,
            target_latency_s=target_latency_s,
            idle=(lambda: self.running == 0) if close_when_idle else None,
            spacing_s=spacing_s,
        )

    @property
    def saturated(self) -> bool:
        """Every slot runs a batch: the next closed batch waits for one."""
        return self.running >= self._slots

    async def put(self, item: T) -> None:
        await self.batcher.put(item)

    async def flush(self) -> None:
        """Close the open batch now (a revocation drains what is queued)."""
        await self.batcher.flush()

    async def close(self) -> None:
        """End :meth:`run` once what is queued has been run."""
        await self.batcher.close()

    async def run(self, on_failure: FailureHook | None = None) -> None:
        """Run batches until :meth:`close` and every queued item is handled."""
        semaphore = asyncio.Semaphore(self._slots)

        async def run_one(batch: Batch[T]) -> None:
            try:
                await self._handle(batch)
            except Exception as exc:
                if on_failure is not None:
                    on_failure(self.kind, exc, len(batch.items))
                raise
            finally:
                self.running -= 1
                semaphore.release()

        async with asyncio.TaskGroup() as batches:
            async for batch in self.batcher.batches():
                await semaphore.acquire()
                self.running += 1
                batches.create_task(run_one(batch))


@dataclass(frozen=True, slots=True)
class Lanes(Generic[T]):
    """The two lanes of a service: work that needs the model, and work already decided."""

    model: Dispatcher[T]
    decided: Dispatcher[T]
