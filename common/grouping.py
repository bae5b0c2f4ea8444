"""Group commit: calls made while one is running are carried out together by the next run.

:class:`GroupedCall` serialises a costly step (a PostgreSQL transaction, a Kafka send and its
mark) and lets it absorb concurrency instead of queueing behind it: the first caller runs its item
at once, in its own task; the callers that arrive while it runs wait, and the next of them to get
the turn runs every item waiting, in one ``run_group`` call, and answers them all. An idle step
adds no latency and no timer; a busy one does one call per turn, however many callers came.

``run_group`` gets the items in arrival order and returns one result per item, in that order; if
it raises, every item of that group gets the exception. The run happens in a caller's task, so it
is cancelled with that task: the other items of the group are then put back and run by the next
caller (``run_group`` must tolerate an item run twice, as idempotent writes do); the cancelled
caller's own item is dropped unless another run has already taken it.

Its twin ``online.coalesce.Coalescer`` groups look-ups instead: it runs each group in a task of
its own, so a caller that goes away never cancels the statement the others wait on. Here the
work belongs to a caller's task (a batch under supervision), and is cancelled with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["GroupedCall"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(slots=True)
class _Entry(Generic[T, R]):
    item: T
    answer: asyncio.Future[R]
    wake: asyncio.Future[None]
    """Set when ``answer`` is, or when this caller is handed the turn to run the next group."""


def _observe(future: asyncio.Future[R]) -> None:
    """Mark an answer as seen: its caller may have gone (cancelled) before reading it."""
    if not future.cancelled():
        future.exception()


class GroupedCall(Generic[T, R]):
    def __init__(
        self,
        run_group: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        *,
        max_items: int | None = None,
    ) -> None:
        if max_items is not None and max_items < 1:
            raise ValueError("max_items must be >= 1 (or None)")
        self._run_group = run_group
        self._max_items = max_items
        self._waiting: list[_Entry[T, R]] = []
        self._turn_taken = False
        """A caller is running a group, or has been handed the turn to run the next."""
        self.runs = 0
        """``run_group`` calls made so far (items per run = ``items / runs``)."""
        self.items = 0

    async def __call__(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        entry: _Entry[T, R] = _Entry(item, loop.create_future(), loop.create_future())
        entry.answer.add_done_callback(_observe)
        self._waiting.append(entry)
        holds_turn = False
        try:
            if self._turn_taken:
                await entry.wake
            if not entry.answer.done():
                holds_turn = self._turn_taken = True
                while not entry.answer.done():
                    await self._run_next()
        finally:
            if entry in self._waiting:  # cancelled before a run took its item
                self._waiting.remove(entry)
            if holds_turn or (entry.wake.done() and not entry.answer.done()):
                self._hand_over()
        return entry.answer.result()

    def _hand_over(self) -> None:
        """Give the turn to the first caller still waiting, or free it."""
        for entry in self._waiting:
            if not entry.wake.done():
                entry.wake.set_result(None)
                return
        self._turn_taken = False

    async def _run_next(self) -> None:
        """Run the items waiting (at most ``max_items``) as one group and answer them."""
        limit = self._max_items or len(self._waiting)
        group = self._waiting[:limit]
        del self._waiting[:limit]
        self.runs += 1
        self.items += len(group)
        try:
            results = await self._run_group([e.item for e in group])
            if len(results) != len(group):
                raise RuntimeError(f"run_group gave {len(results)} results for {len(group)} items")
        except asyncio.CancelledError:
            # The running caller is going away: the other items wait for the next turn.
            self._waiting[:0] = [e for e in group if not e.answer.done()]
            raise
        except Exception as exc:
            for entry in group:
                if not entry.answer.done():
                    entry.answer.set_exception(exc)
                _wake(entry)
            return
        for entry, result in zip(group, results, strict=True):
            if not entry.answer.done():
                entry.answer.set_result(result)
            _wake(entry)


def _wake(entry: _Entry[T, R]) -> None:
    if not entry.wake.done():
        entry.wake.set_result(None)
