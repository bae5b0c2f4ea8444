"""Shadow scoring: every model batch scored again by a second model, stored, never acted on.

With ``triton.shadow_model_name`` set, the batch processor hands each model batch to
:meth:`ShadowScorer.submit` once its live verdicts are stored, acknowledged and published. Submit
never waits: it queues the batch (the texts the live model scored and the live rule outcomes) or
drops it. A background loop (:meth:`ShadowScorer.run`) asks the shadow model for one batch at a
time, decides each message with the same policy over the same rule hits
(``pipelines.verdict_factory.make_verdict``) and stores the shadow verdicts in
``shadow_verdicts`` (``engine.stores.shadow_verdicts``). Nothing the shadow does reaches a live
verdict: it has its own client (its own breakers), its own writes, and its failures only count.

Live work goes first: a shadow call starts only while the live side has room (its model lane
has a free slot and fetching is not paused for backpressure; each service's builder says so with
:meth:`ShadowScorer.defer_to`), so under load shadow batches wait in a short queue and are shed
there. Every message the shadow does not score is counted in
``modstream_shadow_dropped_total{reason}``:

- ``queue_full``: ``triton.shadow_queue_batches`` batches are already waiting;
- ``unavailable`` / ``rejected``: the shadow model cannot answer now / refused the texts;
- ``store_failed``: PostgreSQL did not take the shadow rows;
- ``shutdown``: still queued when the service stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from common.logs import get_logger
from engine.inference import InferenceClient, InferenceError
from engine.metrics import Metrics
from engine.policy_stage import CurrentPolicy
from engine.stores.database import StoreError
from pipelines.rule_hits import RuleOutcome
from pipelines.tenants import DEFAULT_TENANT
from pipelines.verdict import Verdict
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict

__all__ = ["ShadowItem", "ShadowScorer", "ShadowStore"]

_log = get_logger(__name__)
_LIVE_BUSY_POLL_S = 0.01
"""How often a waiting shadow batch looks whether the live side has room again."""


@dataclass(frozen=True, slots=True)
class ShadowItem:
    """One message of a model batch: its live verdict and the text the live model scored."""

    live: Verdict
    model_text: str
    tenant: str = DEFAULT_TENANT
    """The message's tenant: the shadow decides with its thresholds, as the live side did."""


class ShadowStore(Protocol):
    """Where shadow verdicts go (``engine.stores.shadow_verdicts.ShadowVerdictStore``)."""

    async def write(self, verdicts: Sequence[Verdict]) -> None: ...


class ShadowScorer:
    """Scores submitted batches with the shadow model in the background (module docstring)."""

    def __init__(
        self,
        *,
        inference: InferenceClient,
        store: ShadowStore,
        policy: CurrentPolicy,
        metrics: Metrics,
        queue_batches: int,
    ) -> None:
        if queue_batches < 1:
            raise ValueError("queue_batches must be >= 1")
        self.inference = inference
        self._store = store
        self._policy = policy
        self._metrics = metrics
        self._queue: deque[list[ShadowItem]] = deque()
        self._queue_batches = queue_batches
        self._wake = asyncio.Event()
        self._live_busy: Callable[[], bool] = lambda: False

    def defer_to(self, live_busy: Callable[[], bool]) -> None:
        """Start no shadow call while ``live_busy()`` (the service's builder says what that is)."""
        self._live_busy = live_busy

    @property
    def queued(self) -> int:
        """Batches waiting for the shadow model."""
        return len(self._queue)

    def submit(
        self,
        live: Sequence[Verdict],
        model_texts: Sequence[str],
        tenants: Sequence[str] | None = None,
    ) -> None:
        """Queue one model batch for the shadow (its live verdicts and the texts the live model
        scored, in order), or drop it; never waits."""
        tenants = tenants if tenants is not None else [DEFAULT_TENANT] * len(live)
        items = [
            ShadowItem(v, t, tenant)
            for v, t, tenant in zip(live, model_texts, tenants, strict=True)
        ]
        if not items:
            return
        if len(self._queue) >= self._queue_batches:
            self._drop("queue_full", len(items))
        else:
            self._queue.append(items)
            self._wake.set()

    def _drop(self, reason: str, count: int) -> None:
        self._metrics.shadow_dropped_total.labels(reason).inc(count)

    async def run(self, done: asyncio.Event) -> None:
        """Score queued batches one at a time until ``done``; what is left then is dropped."""
        try:
            while not done.is_set():
                if not self._queue:
                    self._wake.clear()
                    waiters = [asyncio.ensure_future(e.wait()) for e in (self._wake, done)]
                    try:
                        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for waiter in waiters:
                            waiter.cancel()
                    continue
                if self._live_busy():
                    # Live work first: wait for a free live slot (the queue sheds the excess).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(done.wait(), _LIVE_BUSY_POLL_S)
                    continue
                await self.score(self._queue.popleft())
        finally:
            while self._queue:
                self._drop("shutdown", len(self._queue.popleft()))

    async def score(self, batch: Sequence[ShadowItem]) -> int:
        """Score and store one batch now; returns the shadow verdicts stored (0 when dropped)."""
        inference = self.inference
        # Half-open shadow replicas ask model-ready (no call else); a DNS pool looks up its
        # name when due.
        await inference.probe()
        try:
            result = await inference.infer([item.model_text for item in batch])
        except InferenceError as exc:
            self._drop("unavailable" if exc.retriable else "rejected", len(batch))
            _log.info("shadow_inference_failed", error=str(exc), items=len(batch))
            return 0
        self._metrics.shadow_inference_seconds.observe(result.latency_ms / 1000.0)
        run = ModelRun(
            result.model_name, result.model_version, str(uuid.uuid4()), result.latency_ms
        )
        verdicts = [
            make_verdict(
                MessageFacts.of_verdict(item.live),
                RuleOutcome(item.live.rule_hits),
                scores,
                self._policy.thresholds_for(item.tenant),
                run,
                queue_ms=0.0,
            )
            for item, scores in zip(batch, result.scores, strict=True)
        ]
        try:
            await self._store.write(verdicts)
        except StoreError as exc:
            self._drop("store_failed", len(batch))
            _log.warning("shadow_store_failed", error=str(exc), items=len(batch))
            return 0
        self._metrics.shadow_scored_total.inc(len(verdicts))
        return len(verdicts)
