"""The server-side batch collector: concurrent checks become one model request, then one write.

Each check hands its decoded, rule-evaluated record (the daemon's ``Work``) to :meth:`submit` and
awaits the returned future. Model work goes to a ``MicroBatcher`` that closes a batch at
``max_items``, after ``max_wait_s``, or at once when the model has no request in flight; rule
blocks, and every message while the circuit breaker is open, go to a second batcher that never
waits for the model. Closed batches run through the daemon's own ``BatchProcessor`` (infer,
decide, one PostgreSQL transaction with escalations and pending texts, publish after durable),
at most ``max_in_flight`` model batches at once. A future is answered when its verdict row is
durable: the processor's store is wrapped so that each stored verdict resolves its future.

A model batch runs under the earliest model deadline of its messages (``online.budget``);
messages whose budget is already spent when the batch starts skip the model and get the
rules-only ``pending_model`` verdict at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from common.logs import get_logger
from online.budget import MODEL_DEADLINE
from online.errors import NotDecided
from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict
from worker.batcher import Batch, MicroBatcher
from worker.processing import BatchStore, Work
from worker.stores.verdict_batches import VerdictBatch

__all__ = ["Collector", "CollectorStats", "Processor"]

_log = get_logger(__name__)
_DECIDED_WAIT_S = 0.001
"""Rule verdicts wait at most this long for each other (only while a write is running)."""


class Processor(Protocol):
    """The daemon's ``BatchProcessor``, as the collector uses it."""

    async def process_model_batch(self, batch: Batch[Work]) -> None: ...

    async def process_decided_batch(self, batch: Batch[Work]) -> None: ...


@dataclass(slots=True)
class _Pending:
    model_deadline: float
    answer: asyncio.Future[Verdict]


@dataclass(slots=True)
class CollectorStats:
    """Model batches run and the messages they carried (the mean coalesced batch size)."""

    model_batches: int = 0
    model_items: int = 0
    decided_batches: int = 0
    decided_items: int = 0

    @property
    def mean_model_batch(self) -> float:
        return self.model_items / self.model_batches if self.model_batches else 0.0


class _AnsweringStore:
    """The processor's store: writes the batch, then answers each stored verdict's future."""

    def __init__(self, inner: BatchStore, pending: dict[SourcePosition, _Pending]) -> None:
        self._inner = inner
        self._pending = pending

    async def write(self, batch: VerdictBatch) -> None:
        await self._inner.write(batch)
        for verdict in batch.verdicts:
            waiting = self._pending.pop(verdict.position, None)
            if waiting is not None and not waiting.answer.done():
                waiting.answer.set_result(verdict)


def _observe(future: asyncio.Future[Verdict]) -> None:
    """Mark an answer's outcome as seen (its caller may have gone: deadline, cancellation)."""
    if not future.cancelled():
        future.exception()


class Collector:
    def __init__(
        self,
        *,
        store: BatchStore,
        make_processor: Callable[[BatchStore], Processor],
        max_items: int,
        max_wait_s: float,
        max_in_flight: int,
        queue_items: int,
        min_model_s: float,
        model_usable: Callable[[], bool],
        on_budget_spent: Callable[[int], None] | None = None,
    ) -> None:
        self._pending: dict[SourcePosition, _Pending] = {}
        self._processor = make_processor(_AnsweringStore(store, self._pending))
        self._running = {"model": 0, "decided": 0}
        self._model: MicroBatcher[Work] = MicroBatcher(
            max_items,
            max_wait_s,
            queue_items=queue_items,
            idle=lambda: self._running["model"] == 0,
        )
        self._decided: MicroBatcher[Work] = MicroBatcher(
            max_items,
            _DECIDED_WAIT_S,
            queue_items=queue_items,
            idle=lambda: self._running["decided"] == 0,
        )
        self._max_in_flight = max_in_flight
        self._min_model_s = min_model_s
        self._model_usable = model_usable
        self._on_budget_spent = on_budget_spent
        self.stats = CollectorStats()

    async def submit(self, work: Work, model_deadline: float) -> asyncio.Future[Verdict]:
        """Queue ``work`` (decoded and rule-evaluated); the future is answered once its verdict
        row is durable, or fails with ``NotDecided``. It outlives a cancelled caller."""
        if work.message is None or work.outcome is None:
            raise ValueError(f"record {work.position} is not decoded and evaluated")
        if work.position in self._pending:
            raise ValueError(f"record {work.position} is already being decided")
        answer: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        answer.add_done_callback(_observe)
        self._pending[work.position] = _Pending(model_deadline, answer)
        if work.outcome.is_decisive or not self._model_usable():
            await self._decided.put(work)
        else:
            await self._model.put(work)
        return answer

    async def run(self) -> None:
        """Run batches until :meth:`close` and every queued message is answered."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._dispatch("model", self._model, self._run_model))
            group.create_task(self._dispatch("decided", self._decided, self._run_decided))

    async def close(self) -> None:
        """Stop taking batches once what is queued has been run."""
        await self._model.close()
        await self._decided.close()

    async def _dispatch(
        self,
        kind: str,
        batcher: MicroBatcher[Work],
        handle: Callable[[Batch[Work]], Awaitable[None]],
    ) -> None:
        slots = asyncio.Semaphore(self._max_in_flight)

        async def run_one(batch: Batch[Work]) -> None:
            try:
                await handle(batch)
            finally:
                self._running[kind] -= 1
                slots.release()

        async with asyncio.TaskGroup() as batches:
            async for batch in batcher.batches():
                await slots.acquire()
                self._running[kind] += 1  # counted from creation: the batcher sees it busy
                batches.create_task(run_one(batch))

    async def _run_model(self, batch: Batch[Work]) -> None:
        now = time.monotonic()
        live: list[Work] = []
        for work in batch.items:
            waiting = self._pending.get(work.position)
            if waiting is not None and waiting.model_deadline - now >= self._min_model_s:
                live.append(work)
            else:
                await self._decided.put(work)  # budget spent: the rules-only verdict at once
        if self._on_budget_spent is not None and len(live) < len(batch.items):
            self._on_budget_spent(len(batch.items) - len(live))
        if not live:
            return
        deadline = min(self._pending[w.position].model_deadline for w in live)
        self.stats.model_batches += 1
        self.stats.model_items += len(live)
        token = MODEL_DEADLINE.set(deadline)
        try:
            await self._settle(
                Batch(live, batch.opened_at, batch.reason), self._processor.process_model_batch
            )
        finally:
            MODEL_DEADLINE.reset(token)

    async def _run_decided(self, batch: Batch[Work]) -> None:
        self.stats.decided_batches += 1
        self.stats.decided_items += len(batch.items)
        await self._settle(batch, self._processor.process_decided_batch)

    async def _settle(
        self, batch: Batch[Work], handle: Callable[[Batch[Work]], Awaitable[None]]
    ) -> None:
        """Run the batch; whatever it left unanswered fails with ``NotDecided``."""
        try:
            await handle(batch)
        except Exception as exc:
            _log.error("online_batch_failed", error_type=type(exc).__name__, items=len(batch.items))
        for work in batch.items:
            waiting = self._pending.pop(work.position, None)
            if waiting is not None and not waiting.answer.done():
                waiting.answer.set_exception(NotDecided("no verdict was stored for the message"))
