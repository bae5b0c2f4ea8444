"""Rescanning history (batch mode): a window of the topic decided again with a chosen model.

``modstream rescan`` (``worker.rescan_command``) reads the messages of ``[since, until)`` back
from Kafka (``worker.history``: the text is not kept in PostgreSQL), decides each again the
way the live worker does (strikes, the current rules, the chosen model, the current policy:
``make_verdict``) and compares the new decision with the stored verdict. What changed is
counted by category and direction with example message ids (``worker.rescan_report``).

A person's decision stands (``worker.rescan_review``): a verdict whose review item a moderator
resolved, holds a live claim on, or sent to the admins is never changed; what the rescan would
now decide is counted (``kept``, ``kept_differs``) and, with ``apply``, recorded beside it (the
``rescan_*`` columns, for analysts) and counted in ``modstream_rescan_kept_total``. A change is
counted only among the other verdicts.

With ``apply`` each batch's verdicts that no person has are updated in place with the model, its
version, the rescan id and the time, changed or not (so every verdict a rescan read names the
model that decided it); their review items follow (closed with a system event when no longer
escalated, reopened or opened when escalated), in ONE transaction that also moves the rescan's
per-partition offsets and saves its report (``worker.rescan_store``); the changed verdicts are
then published to the verdict topic (``published = false`` until they are: what a crash left
unpublished is sent by this rescan's own relay when it resumes, or by the live workers' outbox
relay). A rescan that stops anywhere resumes from its last committed batch: nothing is applied
twice (the checkpoint moves with the update, and the update skips a verdict that already carries
this rescan's id). A dry run checkpoints its report the same way.

Strikes are read as they stood when each message was sent (``common.strikes.strikes_as_of``),
not as they stand today.

It shares the model and PostgreSQL with live traffic, so it is throttled (a token bucket per
record read, ``worker.throttle``) and reads from no consumer group. When the model is away it
waits and tries the batch again, then stops, resumable; texts the model refuses keep their
verdict and are counted as ``refused``. Verdicts whose records have left the topic (retention)
are counted as ``expired``, never skipped silently.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from common.logs import get_logger
from common.publishing import PublishDeferred, PublishedMarker, RecordPublisher
from engine.failpoints import Failpoints
from engine.inference import InferenceResult, InferenceUnavailable
from engine.metrics import Metrics
from engine.policy_stage import CurrentPolicy
from engine.refusals import Refused, Scored, score_or_refuse
from engine.rule_stage import RuleStage
from engine.sender_strikes import with_strikes
from engine.stores.database import StoreError
from engine.verdict_publishing import publish_just_stored, verdict_publishing
from pipelines.decode import DecodeError, decode_message
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VerdictRowKey
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict
from worker.rescan_plan import (
    HistoryRecord,
    OffsetRange,
    RescanPlan,
    RescanRequest,
    RescanStopped,
    StoredDecision,
)
from worker.rescan_report import RescanReport, direction
from worker.rescan_review import AppliedBatch, Redecided
from worker.throttle import TokenBucket

__all__ = ["Rescanner"]

_log = get_logger(__name__)


class History(Protocol):
    """The topic's history (``worker.history.TopicHistory``)."""

    finished: set[int]

    async def window(self, since: datetime, until: datetime) -> list[OffsetRange]: ...

    async def log_start(self) -> dict[int, int]: ...

    def assign(self, ranges: Sequence[OffsetRange]) -> None: ...

    @property
    def done(self) -> bool: ...

    async def fetch(self, max_records: int, timeout_ms: int = 1000) -> list[HistoryRecord]: ...


class Store(Protocol):
    """A rescan's rows and the verdicts it compares (``worker.rescan_store.RescanStore``)."""

    async def create(self, plan: RescanPlan) -> None: ...

    async def stored(
        self, topic: str, keys: Sequence[tuple[SourcePosition, datetime]]
    ) -> dict[SourcePosition, StoredDecision]: ...

    async def commit_batch(
        self,
        rescan_id: uuid.UUID,
        *,
        next_offsets: dict[int, int],
        report: Callable[[AppliedBatch], dict[str, Any]],
        decided: Sequence[Redecided] = (),
        model: str = "",
        finished: bool = False,
    ) -> AppliedBatch: ...

    async def count_expired(self, plan: RescanPlan, gone: Sequence[OffsetRange]) -> int: ...


class StrikeHistory(Protocol):
    """Strike totals as they stood at a moment (``engine.stores.strikes.StrikeStore``)."""

    async def strikes_at(
        self, moments: Sequence[tuple[str, datetime]], tenants: Sequence[str] | None = None
    ) -> list[int]: ...


class _Inference(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


class _Relay(Protocol):
    """The verdict outbox relay (``engine.outbox.VerdictOutbox``)."""

    async def relay_all(
        self,
        source_topic: str | None = None,
        partitions: Sequence[int] | None = None,
        rescan_id: uuid.UUID | None = None,
    ) -> int: ...


Progress = Callable[[RescanReport], None]


@dataclass(slots=True)
class _Read:
    """One record of the window, decided again."""

    record: HistoryRecord
    message: ChatMessage
    outcome: RuleOutcome
    model_text: str
    stored: StoredDecision


class Rescanner:
    def __init__(
        self,
        *,
        history: History,
        store: Store,
        inference: _Inference,
        rules: RuleStage,
        strikes: StrikeHistory,
        policy: CurrentPolicy,
        publisher: RecordPublisher,
        outbox: PublishedMarker[VerdictRowKey],
        verdict_topic: str,
        throttle: TokenBucket,
        batch_items: int,
        max_message_bytes: int,
        relay: _Relay | None = None,
        failpoints: Failpoints | None = None,
        unavailable_wait_s: float = 120.0,
        metrics: Metrics | None = None,
    ) -> None:
        self._history = history
        self._store = store
        self._inference = inference
        self._rules = rules
        self._strikes = strikes
        self._policy = policy
        self._verdicts_out = verdict_publishing(publisher, verdict_topic, outbox)
        self._throttle = throttle
        self._batch_items = batch_items
        self._max_bytes = max_message_bytes
        self._relay = relay
        self._failpoints = failpoints or Failpoints(None)
        self._unavailable_wait_s = unavailable_wait_s
        self._metrics = metrics

    async def plan(self, request: RescanRequest) -> RescanPlan:
        """A new rescan of ``request``'s window: its offsets per partition, stored; verdicts
        of the window whose records already left the topic are counted in its report."""
        ranges = await self._history.window(request.since, request.until)
        plan = RescanPlan(
            rescan_id=uuid.uuid4(),
            topic=request.topic,
            group_id=request.group_id,
            since=request.since,
            until=request.until,
            model_name=request.model_name,
            model_version=request.model_version,
            apply=request.apply,
            ranges=tuple(ranges),
            report={},
        )
        report = RescanReport(window=sum(r.end - r.start for r in ranges))
        # Everything below the log start is gone, whatever its offset was.
        log_start = await self._history.log_start()
        report.expired = await self._store.count_expired(
            plan, [OffsetRange(p, 0, start) for p, start in log_start.items() if start > 0]
        )
        plan = replace(plan, report=report.as_json())
        await self._store.create(plan)
        _log.info(
            "rescan_planned",
            rescan_id=str(plan.rescan_id),
            records=report.window,
            expired=report.expired,
            apply=plan.apply,
        )
        return plan

    async def run(self, plan: RescanPlan, progress: Progress | None = None) -> RescanReport:
        """Read what is left of ``plan``'s window to its end; the final report."""
        report = RescanReport.from_json(plan.report)
        if plan.finished:
            return report
        await self._relay_leftovers(plan)
        ranges = await self._skip_expired(plan, report)
        self._history.assign(ranges)
        ends = {r.partition: r.end for r in ranges}
        while not self._history.done:
            records = await self._history.fetch(self._batch_items)
            # Partitions read to their end since the last batch checkpoint at their end.
            next_offsets = {p: ends.pop(p) for p in self._history.finished & ends.keys()}
            if not records and not next_offsets:
                continue
            await self._throttle.take(len(records))
            for record in records:
                p = record.partition
                next_offsets[p] = max(next_offsets.get(p, 0), record.offset + 1)
            await self._batch(plan, report, records, next_offsets)
            if progress is not None:
                progress(report)
        await self._store.commit_batch(
            plan.rescan_id, next_offsets={}, report=lambda _: report.as_json(), finished=True
        )
        _log.info("rescan_finished", rescan_id=str(plan.rescan_id), **report.counts())
        return report

    async def _relay_leftovers(self, plan: RescanPlan) -> None:
        """Publish what an earlier run of this rescan updated but died before publishing (its
        rows left ``published = false``; the live workers' relay would send them too, later)."""
        if self._relay is None:
            return
        try:
            relayed = await self._relay.relay_all(plan.topic, rescan_id=plan.rescan_id)
        except (PublishDeferred, StoreError) as exc:
            _log.warning("rescan_relay_deferred", error=str(exc))
            return
        if relayed:
            _log.info("rescan_leftovers_relayed", rescan_id=str(plan.rescan_id), items=relayed)

    async def _skip_expired(self, plan: RescanPlan, report: RescanReport) -> list[OffsetRange]:
        """The ranges left to read, each from its log start at the earliest; the verdicts
        of records removed since the last checkpoint are counted as expired (and saved)."""
        log_start = await self._history.log_start()
        gone = [
            OffsetRange(r.partition, r.start, min(log_start.get(r.partition, 0), r.end))
            for r in plan.ranges
            if log_start.get(r.partition, 0) > r.start
        ]
        if gone:
            report.expired += await self._store.count_expired(plan, gone)
        return [
            OffsetRange(r.partition, max(r.start, log_start.get(r.partition, 0)), r.end)
            for r in plan.ranges
        ]

    async def _batch(
        self,
        plan: RescanPlan,
        report: RescanReport,
        records: list[HistoryRecord],
        next_offsets: dict[int, int],
    ) -> None:
        """Decide ``records`` again, compare, and (``apply``) keep what a person has and update
        the rest with their review items; the report and the offsets move forward in the same
        transaction."""
        reads = await self._read(plan, report, records)
        decided = await self._decide(plan, report, reads)
        before = report.as_json()

        def saved(applied: AppliedBatch) -> dict[str, Any]:
            after = RescanReport.from_json(before)
            after.add_applied(applied)
            return after.as_json()

        applied = await self._store.commit_batch(
            plan.rescan_id,
            next_offsets=next_offsets,
            report=saved,
            decided=decided if plan.apply else (),
            model=f"{plan.model_name}:{plan.model_version}"
            if plan.model_version
            else plan.model_name,
        )
        report.add_applied(applied)
        if self._metrics is not None:
            self._metrics.rescan_kept_total.labels("different").inc(applied.kept_differs)
            self._metrics.rescan_kept_total.labels("same").inc(applied.kept - applied.kept_differs)
        self._failpoints.hit("rescan_after_commit")
        if applied.updated:
            await self._publish(
                [d.verdict for d in decided if d.verdict.position in applied.updated]
            )

    async def _read(
        self, plan: RescanPlan, report: RescanReport, records: list[HistoryRecord]
    ) -> list[_Read]:
        """Decode, keep ``--group``'s, look up strikes and the stored verdicts, run the rules."""
        report.read += len(records)
        messages: list[tuple[HistoryRecord, ChatMessage]] = []
        for record in records:
            try:
                message = decode_message(record.value, max_bytes=self._max_bytes)
            except DecodeError:
                report.undecodable += 1
                continue
            if plan.group_id is not None and message.group_id != plan.group_id:
                report.other_groups += 1
                continue
            messages.append((record, message))
        stored = await self._store.stored(
            plan.topic,
            [(SourcePosition(plan.topic, r.partition, r.offset), m.sent_at) for r, m in messages],
        )
        found_at = [
            (r, m, stored.get(SourcePosition(plan.topic, r.partition, r.offset)))
            for r, m in messages
        ]
        report.no_verdict += sum(1 for _, _, found in found_at if found is None)
        known = [(r, m, found) for r, m, found in found_at if found is not None]
        # The strikes the sender had when the message was sent, not today's.
        totals = await self._strikes.strikes_at(
            [(m.sender_id, m.sent_at) for _, m, _ in known], [m.tenant for _, m, _ in known]
        )
        reads = []
        for (record, message, found), strikes in zip(known, totals, strict=True):
            enriched = with_strikes(message, strikes)
            outcome, model_text = self._rules.evaluate(enriched)
            reads.append(_Read(record, enriched, outcome, model_text, found))
        return reads

    async def _decide(
        self, plan: RescanPlan, report: RescanReport, reads: list[_Read]
    ) -> list[Redecided]:
        """New verdicts for ``reads`` (rule blocks without the model), compared with the stored
        decisions: a verdict a person has is counted as kept, any other as changed or not."""
        to_score = [r for r in reads if not r.outcome.is_decisive]
        scored, refused = await self._score(plan, to_score)
        report.refused += len(refused)
        decided: list[tuple[_Read, Verdict]] = []
        policy = self._policy
        for read in reads:
            if read.outcome.is_decisive:
                thresholds = policy.thresholds_for(read.message.tenant)
                decided.append((read, self._verdict(plan, read, None, NO_MODEL, thresholds)))
        for item in scored:
            thresholds = policy.thresholds_for(item.item.message.tenant)
            decided.append(
                (item.item, self._verdict(plan, item.item, item.scores, item.run, thresholds))
            )
        redecided: list[Redecided] = []
        for read, verdict in decided:
            report.compared += 1
            old, new = read.stored, verdict.result
            changed = old.decision != new.decision.value or old.escalated != new.escalate
            redecided.append(Redecided(verdict, changed, read.message.text))
            if old.review.stands:
                report.kept += 1
                report.kept_differs += int(changed)
            elif not changed:
                report.unchanged += 1
            else:
                category = new.category or old.category or "none"
                moved = direction(old.decision, old.escalated, new.decision.value, new.escalate)
                report.add_change(category, moved, read.message.message_id)
        return redecided

    def _verdict(
        self,
        plan: RescanPlan,
        read: _Read,
        scores: ModelScores | None,
        run: ModelRun,
        thresholds: PolicyThresholds,
    ) -> Verdict:
        position = SourcePosition(plan.topic, read.record.partition, read.record.offset)
        return make_verdict(
            MessageFacts.of(position, read.message),
            read.outcome,
            scores,
            thresholds,
            run,
            queue_ms=0.0,
        )

    async def _score(
        self, plan: RescanPlan, reads: list[_Read]
    ) -> tuple[list[Scored[_Read]], list[Refused[_Read]]]:
        """``score_or_refuse`` over ``reads``; while the model is away, wait and try again (up
        to ``unavailable_wait_s``), then stop the rescan (resumable)."""
        waited, pause = 0.0, 1.0
        while True:
            try:
                return await score_or_refuse(self._inference, reads, [r.model_text for r in reads])
            except InferenceUnavailable as exc:
                if waited >= self._unavailable_wait_s:
                    raise RescanStopped(
                        plan.rescan_id, f"the model is unavailable ({exc})"
                    ) from exc
                _log.warning("rescan_model_unavailable", waited_s=round(waited, 1), error=str(exc))
                await asyncio.sleep(pause)
                waited += pause
                pause = min(pause * 2, 10.0)

    async def _publish(self, verdicts: list[Verdict]) -> None:
        await publish_just_stored(
            self._verdicts_out, verdicts, deferred_event="rescan_publish_deferred"
        )
