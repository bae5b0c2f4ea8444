"""The online service's publishing loop: stored verdicts go to Kafka on a clock, not per batch.

A call is answered once its verdict is durable; nothing it waits for depends on Kafka. So the
batch processor only queues what each batch stored (``publish_every_s``, ``engine.processing``)
and this loop publishes everything queued every ``every_s``, as one publish: one Kafka request
instead of one per batch, whose CPU cost hardly depends on how many records it carries (about
0.3 ms of the service's CPU each on the development box, BENCHMARKS.md, "Online"). The
published marks then ride on the next verdict write (``engine.stores.carried_marks``); each turn
also sends alone the marks no write has carried for a while.

When the collector has run its last batch (``done``), what is queued is published and marked
before the service closes its clients. A publish Kafka refuses leaves its rows unpublished for
the outbox relay, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from engine.stores.carried_marks import CarriedMarks

__all__ = ["PacedPublishing"]


class PacedPublishing:
    """Runs ``publish_stored`` (the processor's) every ``every_s``, then the overdue marks."""

    def __init__(
        self,
        publish_stored: Callable[[], Awaitable[None]],
        marks: CarriedMarks,
        *,
        every_s: float,
    ) -> None:
        if every_s <= 0:
            raise ValueError("every_s must be > 0")
        self._publish_stored = publish_stored
        self._marks = marks
        self._every_s = every_s

    async def run(self, done: asyncio.Event) -> None:
        """Publish on the clock until ``done``; then publish and mark what is left."""
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._every_s)
            await self._publish_stored()
            await self._marks.send_overdue()
        await self._publish_stored()
        await self._marks.send_alone()
