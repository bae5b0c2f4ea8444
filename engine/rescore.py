"""Re-scoring: verdicts decided by rules alone while the model was down get a model verdict.

A ``pending_model`` verdict's text waits in ``pending_texts`` (written in its verdict
transaction). Re-scoring reads a page of them, asks the model, runs the same policy over the
stored rule hits and the new scores, and in ONE transaction updates the verdict rows in place
(``decided_by`` becomes ``model``), adds any new escalation and deletes the texts. The updated
rows are then published again (the outbox relay retries what fails). The worker does this by
itself whenever the model is ready; ``modstream rescore`` (``worker.command``) does it on demand
for every topic.

When the model refuses a page (``InferenceRejected``, e.g. Triton ``INVALID_ARGUMENT``), the page
is split in halves until the refused texts are found alone (``engine.refusals``). Those rows
keep their rules-only verdict, are recorded in ``rescore_rejections`` with the reason (never the
text) and their text is dropped in the same transaction; every other row is re-scored. One bad
text never stalls the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from common.logs import get_logger
from common.publishing import PublishedMarker, RecordPublisher
from engine.inference import InferenceError, InferenceResult
from engine.policy_stage import CurrentPolicy
from engine.refusals import score_or_refuse
from engine.stores.database import StoreError
from engine.stores.pending_texts import PendingRow, RescoreRejection
from engine.stores.review_items import Escalation
from engine.verdict_publishing import publish_just_stored, verdict_publishing
from pipelines.canonical import canonicalize
from pipelines.messages import SourcePosition
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VerdictRowKey, hits_from_json
from pipelines.verdict_factory import ModelRun, make_verdict

__all__ = ["Rescorer"]

_log = get_logger(__name__)


class _Inference(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


class _Store(Protocol):
    async def pending_model_rows(
        self, limit: int, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[PendingRow]: ...

    async def apply_rescore(
        self,
        verdicts: Sequence[Verdict],
        escalations: Sequence[Escalation],
        done: Sequence[SourcePosition],
        rejected: Sequence[RescoreRejection] = (),
    ) -> set[SourcePosition]: ...

    async def drop_orphan_texts(self) -> int: ...


class Rescorer:
    def __init__(
        self,
        *,
        inference: _Inference,
        store: _Store,
        outbox: PublishedMarker[VerdictRowKey],
        publisher: RecordPublisher,
        policy: CurrentPolicy,
        verdict_topic: str,
        batch_items: int,
        on_rescored: Callable[[int], None] | None = None,
        on_rejected: Callable[[int], None] | None = None,
    ) -> None:
        self._inference = inference
        self._on_rescored = on_rescored
        self._on_rejected = on_rejected
        self._store = store
        self._verdicts_out = verdict_publishing(publisher, verdict_topic, outbox)
        self._policy = policy
        self._batch_items = batch_items
        self.rescored = 0
        self.rejected = 0

    async def rescore_once(
        self, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> int:
        """Re-score one page; returns how many pending rows were read (0: none left).

        Raises ``InferenceError`` / ``StoreError`` when the model or Postgres is unavailable;
        nothing is changed then.
        """
        rows = await self._store.pending_model_rows(self._batch_items, topic, partitions)
        if not rows:
            return 0
        scored, rejected = await self._score(rows)
        verdicts: list[Verdict] = []
        escalations: list[Escalation] = []
        for row, scores, run in scored:
            outcome = RuleOutcome(hits_from_json(row.rule_hits))
            verdict = make_verdict(
                row.facts,
                outcome,
                scores,
                self._policy.thresholds_for(row.facts.tenant),
                run,
                queue_ms=row.queue_ms,
            )
            verdicts.append(verdict)
            if verdict.result.escalate:
                escalations.append(Escalation(verdict, row.text))
        updated = await self._store.apply_rescore(
            verdicts, escalations, [row.facts.position for row, _, _ in scored], rejected
        )
        if rejected:
            self.rejected += len(rejected)
            if self._on_rejected is not None:
                self._on_rejected(len(rejected))
            _log.warning("rescore_rejected", items=len(rejected), reason=rejected[0].reason)
        changed = [v for v in verdicts if v.position in updated]
        self.rescored += len(changed)
        if self._on_rescored is not None:
            self._on_rescored(len(changed))
        _log.info("verdicts_rescored", items=len(changed), read=len(rows))
        await self._publish(changed)
        return len(rows)

    async def _score(
        self, rows: list[PendingRow]
    ) -> tuple[list[tuple[PendingRow, ModelScores, ModelRun]], list[RescoreRejection]]:
        """Scores for ``rows``; texts the model refuses are found by halving and set aside
        (``engine.refusals``). ``InferenceUnavailable`` propagates (nothing is applied then)."""
        texts = [canonicalize(r.text).text for r in rows]
        scored, refused = await score_or_refuse(self._inference, rows, texts)
        rejected = [
            RescoreRejection(r.item.facts.position, r.item.facts.sent_at, r.reason) for r in refused
        ]
        return [(s.item, s.scores, s.run) for s in scored], rejected

    async def rescore_all(
        self, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> int:
        """Re-score until nothing is pending; returns the rows updated."""
        before = self.rescored
        while True:
            read = await self.rescore_once(topic, partitions)
            if read < self._batch_items:
                break
        await self._store.drop_orphan_texts()
        return self.rescored - before

    async def _publish(self, verdicts: list[Verdict]) -> None:
        await publish_just_stored(
            self._verdicts_out, verdicts, deferred_event="rescored_publish_deferred"
        )

    async def run(
        self,
        done: asyncio.Event,
        interval_s: float,
        model_ready: Callable[[], Any],
        topic: str,
        partitions: Callable[[], Sequence[int]],
    ) -> None:
        """While the worker runs: whenever ``model_ready()`` says so, re-score what is pending."""
        while not done.is_set():
            owned = list(partitions())
            if owned and await model_ready():
                try:
                    await self.rescore_all(topic, owned)
                except (InferenceError, StoreError) as exc:
                    _log.warning("rescore_deferred", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), interval_s)
