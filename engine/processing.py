"""From closed batches to durable verdicts: infer, decide, store, acknowledge, publish.

Two kinds of batch reach here. *Model* batches need the model; *decided* batches hold rule blocks
(no model call) and dead letters. Both finish the same way: one PostgreSQL transaction with the
verdicts, escalations, dead letters, pending texts and (for the stream) the partitions' next
offsets; then the batch's source is told its records are durable (``Acknowledger``: the stream
commits offsets to Kafka, the online service answers its callers); then verdicts are published.

Writes and publishes are grouped across concurrent batches (``common.grouping``): batches that
finish while a transaction is running are written together by the next one, and likewise for
the Kafka send and its mark. Each verdict, escalation and record is exactly what its batch made
(the group only shares the round trip); the stream's stored offsets are computed for the whole
group by the one writer, after every earlier group was marked durable, so they are exact.

A program whose acknowledgement never waits for Kafka may publish on a clock instead
(``publish_every_s``: the online service answers its callers once their verdicts are durable):
a batch then ends once acknowledged, its stored verdicts are queued, and
:meth:`BatchProcessor.publish_stored`, called by the program's loop, sends everything queued
since its last call as one publish. Fewer, larger publishes: each costs the service about the
same CPU whatever its size (BENCHMARKS.md, "Online").
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from common.grouping import GroupedCall
from common.logs import get_logger
from common.publishing import PublishDeferred, PublishedMarker, PublishError, RecordPublisher
from engine.attribution import attribute_escalations
from engine.batcher import Batch
from engine.errors import EngineError
from engine.failpoints import Failpoints
from engine.inference import InferenceError, InferenceResult
from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey
from engine.policy_stage import CurrentPolicy
from engine.retry import backoff_s
from engine.stores.database import StoreError
from engine.stores.pending_texts import PendingText
from engine.stores.review_items import Escalation
from engine.stores.verdict_batches import DeadLetter, VerdictBatch
from engine.verdict_publishing import durable_verdicts, verdict_publishing
from engine.work import Work
from pipelines.decode import DecodeError
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Verdict
from pipelines.verdict_codec import VerdictRowKey
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict

__all__ = ["Acknowledger", "BatchProcessor", "BatchStore"]

_log = get_logger(__name__)
_SINK_REJECTED = "sink_rejected"


class Inference(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


class BatchStore(Protocol):
    async def write(self, batch: VerdictBatch) -> VerdictBatch | None:
        """Store ``batch`` atomically; ``None`` when all of it was stored, else what was (a
        store may leave records out: the online service's leaves out repeats of message ids
        claimed before, ``online.claimed_writes``)."""


class Publisher(RecordPublisher, Protocol):
    async def dead_letter(
        self,
        value: bytes | None,
        key: bytes | None,
        position: SourcePosition,
        reason_code: str,
        reason: str,
    ) -> None: ...


class Shadow(Protocol):
    """The shadow scorer as the processor sees it (``engine.shadow.ShadowScorer``)."""

    def submit(
        self,
        live: Sequence[Verdict],
        model_texts: Sequence[str],
        tenants: Sequence[str] | None = None,
    ) -> None: ...


class Acknowledger(Protocol):
    """Tells a batch's source that its records are durable (the seam between the processor
    and where records come from)."""

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        """``works`` are stored (``stored``: the verdicts and dead letters PostgreSQL kept)."""


class _Abandoned(EngineError):
    """Shutdown deadline passed while a dependency was down: leave the batch uncommitted."""


class BatchProcessor:
    """Runs closed batches to durable, acknowledged, published verdicts.

    ``positions`` is the stream's offset tracker: the next offsets it gives are stored in each
    transaction and the records are marked durable right after it. A source without offsets
    passes ``None`` (the online service: its coordinates are claims, ``online.claims``).
    ``acknowledger`` is told of every durable batch before its verdicts are published.
    ``shadow`` (``engine.shadow``) is handed each model batch once it is published (queued for
    publishing, with ``publish_every_s``). With ``publish_every_s`` a batch's stored verdicts
    are published by the next :meth:`publish_stored`, which the program calls that often.
    With ``attribute`` (the default) a model batch with escalations the model decided makes one
    more inference call, for the words that moved each (``engine.attribution``).
    """

    def __init__(
        self,
        *,
        inference: Inference,
        store: BatchStore,
        outbox: PublishedMarker[VerdictRowKey],
        publisher: Publisher,
        acknowledger: Acknowledger,
        positions: OffsetTracker | None,
        policy: CurrentPolicy,
        verdict_topic: str,
        metrics: Metrics,
        give_up: asyncio.Event,
        failpoints: Failpoints | None = None,
        shadow: Shadow | None = None,
        publish_every_s: float | None = None,
        attribute: bool = True,
    ) -> None:
        if publish_every_s is not None and publish_every_s <= 0:
            raise ValueError("publish_every_s must be > 0 (or None)")
        self._inference = inference
        self._attribute = attribute
        self._shadow = shadow
        self._store = store
        self._publisher = publisher
        self._acknowledger = acknowledger
        self._positions = positions
        self._policy = policy
        self._metrics = metrics
        self._give_up = give_up
        self._failpoints = failpoints or Failpoints(None)
        self._verdicts_out = verdict_publishing(
            publisher, verdict_topic, outbox, after_send=self._hit_during_publish
        )
        self.store_healthy = True
        self._writes: GroupedCall[tuple[list[Work], VerdictBatch], VerdictBatch] = GroupedCall(
            self._write_group
        )
        self._publishes: GroupedCall[list[Verdict], None] = GroupedCall(self._publish_group)
        self.publish_every_s = publish_every_s
        self._stored: list[Verdict] = []
        """Stored verdicts waiting for :meth:`publish_stored` (with ``publish_every_s``)."""

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
        if self._attribute and any(v.result.escalate for v in verdicts):
            verdicts = await attribute_escalations(
                self._inference,
                verdicts,
                [_message(w).text for w in works],
                [_model_text(w) for w in works],
                self._metrics,
            )
        self._metrics.batches_total.labels("model", batch.reason).inc()
        self._metrics.batch_size.observe(len(works))
        stored = await self._finish(works, verdicts, [])
        if self._shadow is not None and stored is not None:
            # Only now, with the live verdicts stored and published: the shadow never delays one.
            if len(stored) < len(verdicts):  # rows refused, or online repeats left out
                kept = {v.position for v in stored}
                works = [w for w in works if w.position in kept]
                verdicts = [v for v in verdicts if v.position in kept]
            self._shadow.submit(
                verdicts, [_model_text(w) for w in works], [_message(w).tenant for w in works]
            )

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
        message = _message(work)
        return make_verdict(
            MessageFacts.of(work.position, message),
            work.outcome or RuleOutcome(),
            scores,
            self._policy.thresholds_for(message.tenant),
            run,
            queue_ms=max(0.0, (started - work.fetched_at) * 1000.0),
        )

    async def _finish(
        self, works: list[Work], verdicts: list[Verdict], letters: list[DeadLetter]
    ) -> list[Verdict] | None:
        """Store, acknowledge and publish; the verdicts stored (``None``: abandoned)."""
        texts = {w.position: w.message.text for w in works if w.message is not None}
        escalations = [Escalation(v, texts[v.position]) for v in verdicts if v.result.escalate]
        pending = [
            PendingText(v.position, v.sent_at, texts[v.position])
            for v in verdicts
            if v.result.decided_by is DecidedBy.PENDING_MODEL
        ]
        batch = VerdictBatch(verdicts, escalations, letters, {}, pending)
        try:
            stored = await self._writes((works, batch))
        except _Abandoned:
            _log.warning("batch_abandoned", items=len(works))
            return None
        durable_at = time.time()
        self._failpoints.hit("after_pg_commit")
        await self._acknowledger.durable(works, stored)
        self._observe(works, stored, durable_at)
        for letter in stored.dead_letters:
            self._metrics.dead_letters_total.labels(letter.reason_code).inc()
        if self.publish_every_s is None:
            await self._publishes(stored.verdicts)
        else:
            self._stored.extend(stored.verdicts)
        return stored.verdicts

    async def publish_stored(self) -> None:
        """Publish the verdicts stored since the last call, as one publish (with
        ``publish_every_s``; its program calls this that often, and once more after its last
        batch). What Kafka refuses stays unpublished for the outbox relay."""
        verdicts, self._stored = self._stored, []
        if verdicts:
            await self._publish_group([verdicts])

    async def _write_group(
        self, group: Sequence[tuple[list[Work], VerdictBatch]]
    ) -> list[VerdictBatch]:
        """One transaction for the batches of ``group`` (with retries and isolation), then
        their records are marked durable; each batch gets back what was stored of it."""
        works = [w for batch_works, _ in group for w in batch_works]
        merged = VerdictBatch(
            [v for _, b in group for v in b.verdicts],
            [e for _, b in group for e in b.escalations],
            [d for _, b in group for d in b.dead_letters],
            self._next_offsets(works),
            [p for _, b in group for p in b.pending_texts],
        )
        stored = await self._write(merged)
        if self._positions is not None:
            for key, offsets in _by_partition(works).items():
                self._positions.mark_durable(key, offsets)
            self._metrics.in_flight_records.set(self._positions.in_flight())
        if len(group) == 1:
            return [stored]
        return [_stored_of(stored, batch_works) for batch_works, _ in group]

    def _next_offsets(self, works: Sequence[Work]) -> dict[PartitionKey, int]:
        """The partitions' next offsets to store with ``works`` (computed by the one writer, so
        they include every batch already durable); none for a source without offsets."""
        if self._positions is None:
            return {}
        return {
            key: point
            for key, offsets in _by_partition(works).items()
            if (point := self._positions.point_with(key, offsets)) is not None
        }

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
        """Write, retrying while the store error is ``retriable`` (PostgreSQL is away); rows
        PostgreSQL refuses (an error that is not) are isolated."""
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                stored = await self._write_or_isolate(batch)
            except StoreError as exc:
                if not exc.retriable:
                    raise  # refused even when written alone: not ours to retry
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
            stored = await self._store.write(batch)
        except StoreError as exc:
            if exc.retriable:
                raise
            _log.error("sink_rejected_batch", error=str(exc), items=len(batch.verdicts))
            return await self._isolate(batch)
        return batch if stored is None else stored

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
                stored = await self._store.write(single)
            except StoreError as exc:
                if exc.retriable:
                    raise
                letters.append(
                    DeadLetter(verdict.position, _SINK_REJECTED, str(exc)[:200], 0, verdict.tenant)
                )
            else:
                if stored is None or stored.verdicts:
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
                if not exc.retriable:
                    raise  # the DLQ refuses these records themselves: a bug to see, not retry
                _log.warning("dead_letter_retry", error=str(exc), attempt=attempt)
                if self._give_up.is_set():
                    raise _Abandoned from exc
                await asyncio.sleep(backoff_s(attempt, 0.2, 5.0))

    def _hit_during_publish(self) -> None:
        self._failpoints.hit("during_publish")

    async def _publish_group(self, group: Sequence[list[Verdict]]) -> list[None]:
        """One publish (a send per partition, one mark) for the stored verdicts of ``group``."""
        verdicts = [v for batch in group for v in batch]
        try:
            await self._verdicts_out.publish(
                durable_verdicts(verdicts, created_at=datetime.now(UTC))
            )
        except PublishDeferred as exc:
            # The rows stay ``published = false``; the outbox relay sends them later.
            self._metrics.publish_failures_total.inc()
            _log.warning("verdict_publish_deferred", error=str(exc), items=len(verdicts))
        return [None] * len(group)


def _model_text(work: Work) -> str:
    """What the model scores: the canonical text the rule stage made (``engine.rule_stage``)."""
    if work.model_text is None:
        raise ValueError(f"record {work.position} has not been through the rule stage")
    return work.model_text


def _by_partition(works: Sequence[Work]) -> dict[PartitionKey, list[int]]:
    by_partition: dict[PartitionKey, list[int]] = {}
    for w in works:
        by_partition.setdefault(w.partition_key, []).append(w.position.offset)
    return by_partition


def _stored_of(stored: VerdictBatch, works: Sequence[Work]) -> VerdictBatch:
    """The part of a group's stored batch that belongs to the batch of ``works``."""
    mine = {w.position for w in works}
    return VerdictBatch(
        [v for v in stored.verdicts if v.position in mine],
        dead_letters=[d for d in stored.dead_letters if d.position in mine],
    )


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
    return DeadLetter(
        work.position, error.code.value, error.reason, len(work.raw or b""), error.tenant
    )
