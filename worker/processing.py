"""From closed batches to durable verdicts: infer, decide, store, commit, publish.

Two kinds of batch reach here. *Model* batches need Triton; *decided* batches hold rule blocks
(no model call) and dead letters. Both finish the same way: one Postgres transaction with the
verdicts, escalations, dead letters and the partitions' next offsets; then the tracker marks the
records durable and the offsets are committed to Kafka; then verdicts are published.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from common.logs import get_logger
from common.publishing import PublishDeferred, PublishedMarker, PublishError, RecordPublisher
from pipelines.canonical import canonicalize
from pipelines.decode import DecodeError
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Verdict
from pipelines.verdict_codec import VerdictRowKey
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict
from worker.batcher import Batch
from worker.failpoints import Failpoints
from worker.inference import InferenceError, InferenceResult
from worker.metrics import Metrics
from worker.offsets import OffsetTracker, PartitionKey
from worker.retry import backoff_s
from worker.stores.database import StoreError, StoreUnavailable
from worker.stores.pending_texts import PendingText
from worker.stores.review_items import Escalation
from worker.stores.verdict_batches import DeadLetter, VerdictBatch
from worker.verdict_publishing import durable_verdicts, verdict_publishing

__all__ = ["BatchProcessor", "Work"]

_log = get_logger(__name__)
_SINK_REJECTED = "sink_rejected"


@dataclass(slots=True)
class Work:
    """One fetched record on its way to a verdict or a dead letter."""

    position: SourcePosition
    kafka_key: bytes | None
    fetched_at: float
    message: ChatMessage | None = None
    outcome: RuleOutcome | None = None
    error: DecodeError | None = None
    raw: bytes | None = None
    """Original bytes, kept only for records that will be dead-lettered."""
    model_text: str | None = None
    """The canonical text the rules matched, which is what the model scores (the raw text is
    what is stored and shown to moderators)."""
    produced_at: float | None = None
    """The Kafka record's timestamp (epoch seconds), when it has one."""

    @property
    def partition_key(self) -> PartitionKey:
        return (self.position.topic, self.position.partition)


class Inference(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


class BatchStore(Protocol):
    async def write(self, batch: VerdictBatch) -> None: ...


class Publisher(RecordPublisher, Protocol):
    async def dead_letter(
        self,
        value: bytes | None,
        key: bytes | None,
        position: SourcePosition,
        reason_code: str,
        reason: str,
    ) -> None: ...


class Committer(Protocol):
    async def commit(self, points: Mapping[PartitionKey, int | None]) -> None: ...


class _Abandoned(Exception):
    """Shutdown deadline passed while a dependency was down: leave the batch uncommitted."""


class BatchProcessor:
    def __init__(
        self,
        *,
        inference: Inference,
        store: BatchStore,
        outbox: PublishedMarker[VerdictRowKey],
        publisher: Publisher,
        committer: Committer,
        tracker: OffsetTracker,
        thresholds: PolicyThresholds,
        verdict_topic: str,
        metrics: Metrics,
        give_up: asyncio.Event,
        failpoints: Failpoints | None = None,
    ) -> None:
        self._inference = inference
        self._store = store
        self._publisher = publisher
        self._committer = committer
        self._tracker = tracker
        self._thresholds = thresholds
        self._metrics = metrics
        self._give_up = give_up
        self._failpoints = failpoints or Failpoints(None)
        self._verdicts_out = verdict_publishing(
            publisher, verdict_topic, outbox, after_send=self._hit_during_publish
        )
        self.store_healthy = True
        self._write_lock = asyncio.Lock()

    # -- the two batch kinds -------------------------------------------------------------

    async def process_model_batch(self, batch: Batch[Work]) -> None:
        works = batch.items
        started = time.monotonic()
        scores: list[ModelScores | None] = [None] * len(works)
        run = ModelRun(batch_id=str(uuid.uuid4()))
        try:
            result = await self._infer([_model_text(w) for w in works])
        except InferenceError as exc:
            self._metrics.inference_failures_total.labels(type(exc).__name__).inc()
            _log.warning("inference_failed", error=str(exc), items=len(works))
        else:
            scores = list(result.scores)
            run = ModelRun(result.model_name, result.model_version, run.batch_id, result.latency_ms)
            self._metrics.inference_seconds.observe(result.latency_ms / 1000.0)
        verdicts = [self._verdict(w, s, started, run) for w, s in zip(works, scores, strict=True)]
        self._metrics.batches_total.labels("model", batch.reason).inc()
        self._metrics.batch_size.observe(len(works))
        await self._finish(works, verdicts, [])

    async def _infer(self, texts: list[str]) -> InferenceResult:
        if self._failpoints.armed != "during_inference":
            return await self._inference.infer(texts)
        call = asyncio.ensure_future(self._inference.infer(texts))
        await asyncio.sleep(0.01)  # the request is on the wire (or already answered)
        self._failpoints.hit("during_inference")
        return await call

    async def process_decided_batch(self, batch: Batch[Work]) -> None:
        works = batch.items
        started = time.monotonic()
        dead = [w for w in works if w.error is not None]
        try:
            await self._send_dead_letters(dead)
        except _Abandoned:
            _log.warning("batch_abandoned", items=len(works))
            return
        letters = [_dead_letter(w) for w in dead]
        verdicts = [self._verdict(w, None, started, NO_MODEL) for w in works if w.error is None]
        self._metrics.batches_total.labels("decided", batch.reason).inc()
        await self._finish(works, verdicts, letters)

    # -- shared finishing steps ----------------------------------------------------------

    def _verdict(
        self, work: Work, scores: ModelScores | None, started: float, run: ModelRun
    ) -> Verdict:
        return make_verdict(
            MessageFacts.of(work.position, _message(work)),
            work.outcome or RuleOutcome(),
            scores,
            self._thresholds,
            run,
            queue_ms=max(0.0, (started - work.fetched_at) * 1000.0),
        )

    async def _finish(
        self, works: list[Work], verdicts: list[Verdict], letters: list[DeadLetter]
    ) -> None:
        texts = {w.position: w.message.text for w in works if w.message is not None}
        escalations = [Escalation(v, texts[v.position]) for v in verdicts if v.result.escalate]
        pending = [
            PendingText(v.position, v.sent_at, texts[v.position])
            for v in verdicts
            if v.result.decided_by is DecidedBy.PENDING_MODEL
        ]
        by_partition: dict[PartitionKey, list[int]] = {}
        for w in works:
            by_partition.setdefault(w.partition_key, []).append(w.position.offset)
        # Writes are serialised (inference of the next batch still overlaps this write): the
        # offsets computed under the lock then include every batch already durable, so the
        # stored next offset is exact rather than trailing behind a concurrent batch.
        async with self._write_lock:
            offsets = {
                key: point
                for key, offs in by_partition.items()
                if (point := self._tracker.point_with(key, offs)) is not None
            }
            try:
                stored = await self._write(
                    VerdictBatch(verdicts, escalations, letters, offsets, pending)
                )
            except _Abandoned:
                _log.warning("batch_abandoned", items=len(works))
                return
            for key, offs in by_partition.items():
                self._tracker.mark_durable(key, offs)
        self._metrics.in_flight_records.set(self._tracker.in_flight())
        durable_at = time.time()
        self._failpoints.hit("after_pg_commit")
        await self._committer.commit(
            {key: self._tracker.durable_point(key) for key in by_partition}
        )
        self._observe(works, stored, durable_at)
        for letter in stored.dead_letters:
            self._metrics.dead_letters_total.labels(letter.reason_code).inc()
        await self._publish(stored.verdicts)

    def _observe(self, works: list[Work], stored: VerdictBatch, durable_at: float) -> None:
        """Latency histograms per record; counters once per label set, not once per verdict."""
        now = time.monotonic()
        end_to_end = self._metrics.end_to_end_seconds
        produce_to_verdict = self._metrics.produce_to_verdict_seconds
        for w in works:
            end_to_end.observe(now - w.fetched_at)
            if w.produced_at is not None and w.message is not None:
                produce_to_verdict.observe(max(0.0, durable_at - w.produced_at))
        counts = Counter(
            (v.result.decision.value, v.result.decided_by.value) for v in stored.verdicts
        )
        for (decision, decided_by), count in counts.items():
            self._metrics.verdicts_total.labels(decision, decided_by).inc(count)
        escalated = sum(1 for v in stored.verdicts if v.result.escalate)
        if escalated:
            self._metrics.escalations_total.inc(escalated)

    async def _write(self, batch: VerdictBatch) -> VerdictBatch:
        """Write with retries while Postgres is down; isolate rows Postgres rejects."""
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                stored = await self._write_or_isolate(batch)
            except StoreUnavailable as exc:
                # Also when Postgres drops during isolation: retry it all (inserts are idempotent).
                self.store_healthy = False
                _log.warning("sink_unavailable", error=str(exc), attempt=attempt)
                if self._give_up.is_set():
                    raise _Abandoned from exc
                await asyncio.sleep(backoff_s(attempt, 0.2, 5.0))
                continue
            self.store_healthy = True
            self._metrics.sink_seconds.observe(time.perf_counter() - started)
            return stored

    async def _write_or_isolate(self, batch: VerdictBatch) -> VerdictBatch:
        try:
            await self._store.write(batch)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            _log.error("sink_rejected_batch", error=str(exc), items=len(batch.verdicts))
            return await self._isolate(batch)
        return batch

    async def _isolate(self, batch: VerdictBatch) -> VerdictBatch:
        """Postgres refused the batch: store each verdict alone, dead-letter those it refuses."""
        kept: list[Verdict] = []
        letters = list(batch.dead_letters)
        escalations = {e.verdict.position: e for e in batch.escalations}
        pending = {p.position: p for p in batch.pending_texts}
        for verdict in batch.verdicts:
            single = VerdictBatch(
                [verdict],
                [e for e in [escalations.get(verdict.position)] if e],
                pending_texts=[p for p in [pending.get(verdict.position)] if p],
            )
            try:
                await self._store.write(single)
            except StoreUnavailable:
                raise
            except StoreError as exc:
                letters.append(DeadLetter(verdict.position, _SINK_REJECTED, str(exc)[:200], 0))
            else:
                kept.append(verdict)
        rest = VerdictBatch([], [], letters, batch.offsets)
        await self._store.write(rest)
        return VerdictBatch(kept, [], letters, batch.offsets)

    async def _send_dead_letters(self, dead: list[Work]) -> None:
        attempt = 0
        while dead:
            attempt += 1
            try:
                await asyncio.gather(
                    *(
                        self._publisher.dead_letter(
                            w.raw, w.kafka_key, w.position, _error(w).code.value, _error(w).reason
                        )
                        for w in dead
                    )
                )
                return
            except PublishError as exc:
                _log.warning("dead_letter_retry", error=str(exc), attempt=attempt)
                if self._give_up.is_set():
                    raise _Abandoned from exc
                await asyncio.sleep(backoff_s(attempt, 0.2, 5.0))

    def _hit_during_publish(self) -> None:
        self._failpoints.hit("during_publish")

    async def _publish(self, verdicts: list[Verdict]) -> None:
        try:
            await self._verdicts_out.publish(
                durable_verdicts(verdicts, created_at=datetime.now(UTC))
            )
        except PublishDeferred as exc:
            # The rows stay ``published = false``; the outbox relay sends them later.
            self._metrics.publish_failures_total.inc()
            _log.warning("verdict_publish_deferred", error=str(exc), items=len(verdicts))


def _model_text(work: Work) -> str:
    """What the model scores: the canonical text (computed here if routing did not)."""
    if work.model_text is not None:
        return work.model_text
    return canonicalize(_message(work).text).text


def _message(work: Work) -> ChatMessage:
    if work.message is None:
        raise ValueError(f"record {work.position} has no decoded message")
    return work.message


def _error(work: Work) -> DecodeError:
    if work.error is None:
        raise ValueError(f"record {work.position} is not a dead letter")
    return work.error


def _dead_letter(work: Work) -> DeadLetter:
    error = _error(work)
    return DeadLetter(work.position, error.code.value, error.reason, len(work.raw or b""))
