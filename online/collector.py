"""The server-side batch collector: concurrent checks become one model request, then one write.

Each check hands its decoded, rule-evaluated record (the daemon's ``Work``) to :meth:`submit` and
awaits the returned future. Model work goes to the daemon's ``model`` lane (``engine.dispatch``),
paced: a batch closes ``max_wait_s`` after the previous one closed, at once if that has passed,
sooner if at the recent arrival rate no other message is due by then, or when it holds
``max_items`` (``spacing_s``, ``engine.batcher``). Each batch costs the service a model call, a
write and its share of a publish, about 1 ms of CPU on the development box whatever its size,
so under load one batch about every ``max_wait_s`` carries everything that arrived meanwhile,
while at a low rate a message goes at once (BENCHMARKS.md, "Online"). Rule
blocks, and every message while the circuit breaker is open, go to a ``decided`` lane that
never waits for the model. Closed batches run through the daemon's own
``BatchProcessor`` (infer, decide, one PostgreSQL transaction with escalations and pending texts,
publish after durable), at most ``max_in_flight`` batches per lane at once. A future is answered
when its verdict row is durable: the processor's acknowledger is ``online.answers``.

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
from engine.batcher import Batch
from engine.dispatch import Dispatcher
from engine.work import Work
from online.answers import PendingAnswers
from online.budget import MODEL_DEADLINE
from pipelines.verdict import Verdict

__all__ = ["Collector", "CollectorStats", "Processor"]

_log = get_logger(__name__)
_DECIDED_WAIT_S = 0.001
"""Rule verdicts wait at most this long for each other (only while a write is running)."""


class Processor(Protocol):
    """The daemon's ``BatchProcessor``, as the collector uses it."""

    async def process_model_batch(self, batch: Batch[Work]) -> None: ...

    async def process_decided_batch(self, batch: Batch[Work]) -> None: ...


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


class Collector:
    def __init__(
        self,
        *,
        answers: PendingAnswers,
        processor: Processor,
        max_items: int,
        max_wait_s: float,
        max_in_flight: int,
        queue_items: int,
        min_model_s: float,
        model_usable: Callable[[], bool],
        on_budget_spent: Callable[[int], None] | None = None,
    ) -> None:
        self._answers = answers
        self._processor = processor
        self._model: Dispatcher[Work] = Dispatcher(
            "model",
            self._run_model,
            slots=max_in_flight,
            max_items=max_items,
            max_wait_s=max_wait_s,
            queue_items=queue_items,
            close_when_idle=False,
            spacing_s=max_wait_s,
        )
        self._decided: Dispatcher[Work] = Dispatcher(
            "decided",
            self._run_decided,
            slots=max_in_flight,
            max_items=max_items,
            max_wait_s=_DECIDED_WAIT_S,
            queue_items=queue_items,
        )
        self._min_model_s = min_model_s
        self._model_usable = model_usable
        self._on_budget_spent = on_budget_spent
        self.stats = CollectorStats()

    @property
    def model_saturated(self) -> bool:
        """Every model batch slot is taken: the next model batch waits for one."""
        return self._model.saturated

    async def submit(self, work: Work, model_deadline: float) -> asyncio.Future[Verdict]:
        """Queue ``work`` (decoded and rule-evaluated); the future is answered once its verdict
        row is durable, or fails with ``NotDecided``. It outlives a cancelled caller."""
        if work.message is None or work.outcome is None:
            raise ValueError(f"record {work.position} is not decoded and evaluated")
        answer = self._answers.expect(work.position, model_deadline)
        if work.outcome.is_decisive or not self._model_usable():
            await self._decided.put(work)
        else:
            await self._model.put(work)
        return answer

    async def run(self) -> None:
        """Run batches until :meth:`close` and every queued message is answered."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._model.run())
            group.create_task(self._decided.run())

    async def close(self) -> None:
        """Stop taking batches once what is queued has been run."""
        await self._model.close()
        await self._decided.close()

    async def _run_model(self, batch: Batch[Work]) -> None:
        now = time.monotonic()
        live: list[Work] = []
        deadline = float("inf")
        for work in batch.items:
            waiting = self._answers.model_deadline(work.position)
            if waiting is not None and waiting - now >= self._min_model_s:
                live.append(work)
                deadline = min(deadline, waiting)
            else:
                await self._decided.put(work)  # budget spent: the rules-only verdict at once
        if self._on_budget_spent is not None and len(live) < len(batch.items):
            self._on_budget_spent(len(batch.items) - len(live))
        if not live:
            return
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
        self._answers.fail_unanswered(batch.items)
