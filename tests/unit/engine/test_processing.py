"""Tests for engine.processing: batches become one durable write, then commit, then publish."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

import engine.processing as processing_module
from common.publishing import PublishError
from engine.batcher import Batch
from engine.inference import InferenceResult, InferenceUnavailable
from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey
from engine.policy_stage import PolicyStage
from engine.processing import BatchProcessor
from engine.stores.database import StoreError, StoreUnavailable
from engine.stores.verdict_batches import VerdictBatch
from engine.work import Work
from pipelines.canonical import canonicalize
from pipelines.decode import DecodeError, DecodeErrorCode
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision

TOPIC = "chat.messages"
VERDICT_TOPIC = "moderation.verdicts"
SENT_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))


class FakeInference:
    """Returns CALM scores for every text, or raises InferenceUnavailable when ``down``."""

    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.calls: list[list[str]] = []

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        self.calls.append(list(texts))
        if self.down:
            raise InferenceUnavailable("circuit breaker open")
        return InferenceResult([CALM] * len(texts), "moderation", "7", 4.0)


class FakeStore:
    """Records stored VerdictBatch objects; fails on chosen attempts or on rows named "bad"."""

    def __init__(self, events: list[str], *, unavailable_on: set[int] | None = None) -> None:
        self.events = events
        self.unavailable_on = unavailable_on or set()
        self.always_unavailable = False
        self.attempts = 0
        self.stored: list[VerdictBatch] = []
        self.published: list[SourcePosition] = []
        self.marks = 0
        self.on_unavailable: asyncio.Event | None = None
        self.write_gate: asyncio.Event | None = None
        """While set to an unset event, writes wait for it (a slow transaction)."""

    async def write(self, batch: VerdictBatch) -> None:
        self.attempts += 1
        self.events.append("write")
        if self.write_gate is not None:
            await self.write_gate.wait()
        if self.always_unavailable or self.attempts in self.unavailable_on:
            if self.on_unavailable is not None:
                self.on_unavailable.set()
            raise StoreUnavailable("connection refused")
        if any("bad" in v.message_id for v in batch.verdicts):
            raise StoreError("write rejected: 22P05")
        self.stored.append(
            VerdictBatch(
                list(batch.verdicts),
                list(batch.escalations),
                list(batch.dead_letters),
                dict(batch.offsets),
            )
        )
        self.events.append("stored")

    async def mark_published(self, keys: Sequence[tuple[SourcePosition, datetime]]) -> None:
        self.marks += 1
        self.published.extend(position for position, _ in keys)


class FakePublisher:
    """Records dead letters and published verdict records; can fail dead letters N times."""

    def __init__(self, events: list[str], *, dead_letter_failures: int = 0) -> None:
        self.events = events
        self.dead_letter_failures = dead_letter_failures
        self.refuse_verdicts = False
        self.gate: asyncio.Event | None = None
        """While set to an unset event, verdict publishes wait for it (a slow broker)."""
        self.dead_letters: list[tuple[SourcePosition, str]] = []
        self.records: list[tuple[str, bytes | None, bytes]] = []

    async def dead_letter(
        self,
        value: bytes | None,
        key: bytes | None,
        position: SourcePosition,
        reason_code: str,
        reason: str,
    ) -> None:
        if self.dead_letter_failures > 0:
            self.dead_letter_failures -= 1
            raise PublishError("dead letter not acknowledged: KafkaTimeoutError")
        self.events.append("dead_letter")
        self.dead_letters.append((position, reason_code))

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.events.append("publish")
        if self.gate is not None:
            await self.gate.wait()
        if self.refuse_verdicts:
            raise PublishError("publish not acknowledged: KafkaTimeoutError")
        self.records.extend((topic, key, value) for key, value in records)


class FakeCommitter:
    """The stream's acknowledger as ``KafkaSource.durable`` is: commits the durable points of a
    durable batch's partitions; records each commit with the batches stored at that moment."""

    def __init__(self, events: list[str], store: FakeStore, tracker: OffsetTracker) -> None:
        self.events = events
        self.store = store
        self.tracker = tracker
        self.commits: list[dict[PartitionKey, int | None]] = []
        self.stored_when_committed: list[int] = []

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        self.events.append("commit")
        keys = {w.partition_key for w in works}
        self.commits.append({key: self.tracker.durable_point(key) for key in keys})
        self.stored_when_committed.append(len(self.store.stored))


@dataclasses.dataclass
class Rig:
    processor: BatchProcessor
    tracker: OffsetTracker
    inference: FakeInference
    store: FakeStore
    publisher: FakePublisher
    committer: FakeCommitter
    give_up: asyncio.Event
    events: list[str]


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries in these tests must not sleep."""
    monkeypatch.setattr(processing_module, "backoff_s", lambda *_a, **_k: 0.0)


def _rig(
    *,
    inference_down: bool = False,
    unavailable_on: set[int] | None = None,
    dead_letter_failures: int = 0,
    shadow: FakeShadow | None = None,
) -> Rig:
    events: list[str] = shadow.events if shadow is not None else []
    tracker = OffsetTracker()
    inference = FakeInference(down=inference_down)
    store = FakeStore(events, unavailable_on=unavailable_on)
    publisher = FakePublisher(events, dead_letter_failures=dead_letter_failures)
    committer = FakeCommitter(events, store, tracker)
    give_up = asyncio.Event()
    processor = BatchProcessor(
        inference=inference,
        store=store,
        outbox=store,
        publisher=publisher,
        acknowledger=committer,
        positions=tracker,
        policy=PolicyStage(PolicyThresholds()),
        verdict_topic=VERDICT_TOPIC,
        metrics=Metrics(),
        give_up=give_up,
        shadow=shadow,
    )
    return Rig(processor, tracker, inference, store, publisher, committer, give_up, events)


def _work(
    tracker: OffsetTracker,
    offset: int,
    *,
    partition: int = 0,
    message_id: str | None = None,
    outcome: RuleOutcome | None = None,
) -> Work:
    """A decoded record, registered with the tracker as fetched."""
    tracker.start((TOPIC, partition), offset)
    message = ChatMessage(
        message_id=message_id or f"m-{partition}-{offset}",
        group_id="g1",
        sender_id="u1",
        text=f"hello number {offset}",
        sent_at=SENT_AT,
    )
    return Work(
        SourcePosition(TOPIC, partition, offset),
        b"g1",
        0.0,
        message=message,
        outcome=outcome or RuleOutcome(),
        model_text=canonicalize(message.text).text,
    )


def _broken(tracker: OffsetTracker, offset: int) -> Work:
    """A record that failed to decode, to be dead-lettered."""
    tracker.start((TOPIC, 0), offset)
    error = DecodeError("value is not JSON", DecodeErrorCode.INVALID_JSON)
    return Work(SourcePosition(TOPIC, 0, offset), None, 0.0, error=error, raw=b"{nope")


def _blocked(tracker: OffsetTracker, offset: int) -> Work:
    hit = RuleHit("en.slur.1", "hate", Severity.HIGH, RuleAction.BLOCK)
    return _work(tracker, offset, outcome=RuleOutcome((hit,)))


def _batch(works: list[Work], reason: str = "full") -> Batch[Work]:
    return Batch(works, 0.0, reason)


KEY0: PartitionKey = (TOPIC, 0)


async def test_model_batch_verdicts_are_decided_by_the_model() -> None:
    """A model batch calls inference once and stores model verdicts with name and version."""
    rig = _rig()
    works = [_work(rig.tracker, o) for o in range(3)]
    await rig.processor.process_model_batch(_batch(works))
    assert rig.inference.calls == [[w.message.text for w in works if w.message]]
    [stored] = rig.store.stored
    assert [v.position.offset for v in stored.verdicts] == [0, 1, 2]
    for v in stored.verdicts:
        assert v.result.decided_by is DecidedBy.MODEL
        assert v.result.decision is Decision.ALLOW
        assert (v.model_name, v.model_version) == ("moderation", "7")
        assert v.scores == CALM
        assert v.batch_id is not None
    assert len({v.batch_id for v in stored.verdicts}) == 1


async def test_the_model_scores_the_rule_stages_text_and_the_raw_text_is_stored() -> None:
    """Inference gets the canonical text the rule stage left in ``model_text`` (the processor
    canonicalises nothing again), while escalations keep the raw text a moderator must read."""
    rig = _rig()
    routed = _work(rig.tracker, 0)
    routed.model_text = "already canonical"
    threat = _work(rig.tracker, 1)
    assert threat.message is not None
    threat.message = dataclasses.replace(threat.message, text="I will KILL you")
    threat.outcome = RuleOutcome(
        (RuleHit("en.threat.1", "threat", Severity.HIGH, RuleAction.ESCALATE),)
    )
    threat.model_text = "i will kill you"
    await rig.processor.process_model_batch(_batch([routed, threat]))
    assert rig.inference.calls == [["already canonical", "i will kill you"]]
    [stored] = rig.store.stored
    assert [e.message_text for e in stored.escalations] == ["I will KILL you"]


async def test_a_record_that_skipped_the_rule_stage_fails_its_batch() -> None:
    """Without ``model_text`` a model batch raises (a wiring error, never scored on raw text)."""
    rig = _rig()
    work = _work(rig.tracker, 0)
    work.model_text = None
    with pytest.raises(ValueError, match="rule stage"):
        await rig.processor.process_model_batch(_batch([work]))
    assert rig.store.stored == []


async def test_batches_finishing_during_a_write_are_written_together_with_exact_offsets() -> None:
    """Three batches: the first writes alone; the two that finish while it runs go in one
    transaction with the partition's next offset for both, and one publish and mark after it.
    Each batch is acknowledged with its own records, and every verdict is stored once."""
    rig = _rig()
    gate, broker = asyncio.Event(), asyncio.Event()
    rig.store.write_gate, rig.publisher.gate = gate, broker
    batches = [[_work(rig.tracker, o) for o in range(i * 3, i * 3 + 3)] for i in range(3)]
    first = asyncio.create_task(rig.processor.process_model_batch(_batch(batches[0])))
    await asyncio.sleep(0.01)  # the first transaction is in flight
    rest = [
        asyncio.create_task(rig.processor.process_model_batch(_batch(works)))
        for works in batches[1:]
    ]
    await asyncio.sleep(0.01)
    gate.set()  # the first batch publishes (and waits on the broker); the others write
    await asyncio.sleep(0.01)
    broker.set()
    await asyncio.gather(first, *rest)
    assert [len(b.verdicts) for b in rig.store.stored] == [3, 6]
    assert [b.offsets for b in rig.store.stored] == [{KEY0: 3}, {KEY0: 9}]
    offsets = sorted(v.position.offset for b in rig.store.stored for v in b.verdicts)
    assert offsets == list(range(9))
    assert rig.tracker.durable_point(KEY0) == 9
    assert sorted(c[KEY0] or 0 for c in rig.committer.commits) == [3, 9, 9]
    assert len(rig.publisher.records) == 9
    assert rig.store.marks == 2  # [batch 1], then [batches 2 and 3]


async def test_inference_down_stores_pending_model_verdicts() -> None:
    """When inference raises, verdicts fall back to pending_model and are still stored."""
    rig = _rig(inference_down=True)
    works = [_work(rig.tracker, o) for o in range(2)]
    await rig.processor.process_model_batch(_batch(works, "timeout"))
    [stored] = rig.store.stored
    assert len(stored.verdicts) == 2
    for v in stored.verdicts:
        assert v.result.decided_by is DecidedBy.PENDING_MODEL
        assert v.scores is None
        assert v.model_version is None
    assert rig.tracker.durable_point(KEY0) == 2


async def test_stored_offsets_equal_tracker_point_and_commit_follows_write() -> None:
    """Offsets in the VerdictBatch equal the tracker's point; commit happens after the write."""
    rig = _rig()
    first = [_work(rig.tracker, o) for o in range(3)]
    second = [_work(rig.tracker, o) for o in range(3, 5)]
    other = [_work(rig.tracker, 10, partition=1)]
    expected = rig.tracker.point_with(KEY0, [0, 1, 2])
    await rig.processor.process_model_batch(_batch(first))
    assert rig.store.stored[0].offsets == {KEY0: expected}
    assert expected == 3
    assert rig.tracker.durable_point(KEY0) == 3
    assert rig.committer.commits == [{KEY0: 3}]
    assert rig.committer.stored_when_committed == [1]
    assert rig.events.index("stored") < rig.events.index("commit") < rig.events.index("publish")
    await rig.processor.process_model_batch(_batch(second + other))
    assert rig.store.stored[1].offsets == {KEY0: 5, (TOPIC, 1): 11}
    assert rig.committer.commits[1] == {KEY0: 5, (TOPIC, 1): 11}


async def test_out_of_order_batch_does_not_store_a_point_past_unfinished_records() -> None:
    """A later batch finishing first stores the earlier batch's first offset, not its own end."""
    rig = _rig()
    early = [_work(rig.tracker, o) for o in range(3)]
    late = [_work(rig.tracker, o) for o in range(3, 6)]
    await rig.processor.process_model_batch(_batch(late))
    assert rig.store.stored[0].offsets == {KEY0: 0}
    assert rig.committer.commits[-1] == {KEY0: 0}
    await rig.processor.process_model_batch(_batch(early))
    assert rig.store.stored[1].offsets == {KEY0: 6}
    assert rig.committer.commits[-1] == {KEY0: 6}


async def test_verdicts_are_published_after_commit_and_marked_published() -> None:
    """Stored verdicts go to the verdict topic keyed by group and are then marked published."""
    rig = _rig()
    works = [_work(rig.tracker, o) for o in range(2)]
    await rig.processor.process_model_batch(_batch(works))
    assert [(t, k) for t, k, _ in rig.publisher.records] == [(VERDICT_TOPIC, b"g1")] * 2
    assert rig.store.published == [w.position for w in works]
    assert rig.events[-1] == "publish"


async def test_refused_verdict_publish_leaves_rows_for_the_relay() -> None:
    """Kafka refusing verdicts: the batch commits, nothing is marked, the failure is counted."""
    rig = _rig()
    rig.publisher.refuse_verdicts = True
    registry = rig.processor._metrics.registry
    works = [_work(rig.tracker, o) for o in range(2)]
    await rig.processor.process_model_batch(_batch(works))
    assert rig.store.published == []
    assert rig.committer.commits[-1] == {KEY0: 2}
    assert registry.get_sample_value("modstream_publish_failures_total") == 1.0


async def test_escalations_carry_the_message_text() -> None:
    """An escalate rule hit puts the verdict and its text in the same VerdictBatch."""
    rig = _rig()
    hit = RuleHit("en.threat.1", "threat", Severity.MEDIUM, RuleAction.ESCALATE)
    works = [_work(rig.tracker, 0, outcome=RuleOutcome((hit,))), _work(rig.tracker, 1)]
    await rig.processor.process_model_batch(_batch(works))
    [stored] = rig.store.stored
    [escalation] = stored.escalations
    assert escalation.verdict.position.offset == 0
    assert works[0].message is not None
    assert escalation.message_text == works[0].message.text


async def test_decided_batch_sends_dead_letters_before_one_write() -> None:
    """Dead letters are published before the write and stored with the rule verdicts."""
    rig = _rig()
    works = [_broken(rig.tracker, 0), _blocked(rig.tracker, 1), _broken(rig.tracker, 2)]
    await rig.processor.process_decided_batch(_batch(works))
    assert rig.inference.calls == []
    assert rig.publisher.dead_letters == [
        (SourcePosition(TOPIC, 0, 0), "invalid_json"),
        (SourcePosition(TOPIC, 0, 2), "invalid_json"),
    ]
    assert rig.events.index("dead_letter") < rig.events.index("write")
    [stored] = rig.store.stored
    assert [d.position.offset for d in stored.dead_letters] == [0, 2]
    assert all(d.reason_code == "invalid_json" for d in stored.dead_letters)
    assert stored.dead_letters[0].value_bytes == len(b"{nope")
    [verdict] = stored.verdicts
    assert verdict.position.offset == 1
    assert verdict.result.decided_by is DecidedBy.RULES
    assert verdict.result.decision is Decision.BLOCK
    assert stored.offsets == {KEY0: 3}
    assert rig.tracker.durable_point(KEY0) == 3


async def test_dead_letter_publish_failure_is_retried() -> None:
    """A failed DLQ send is retried before anything is written."""
    rig = _rig(dead_letter_failures=2)
    works = [_broken(rig.tracker, 0)]
    await rig.processor.process_decided_batch(_batch(works))
    assert rig.publisher.dead_letters == [(SourcePosition(TOPIC, 0, 0), "invalid_json")]
    assert len(rig.store.stored) == 1
    assert rig.tracker.durable_point(KEY0) == 1


async def test_give_up_while_dlq_down_abandons_decided_batch_quietly() -> None:
    """With give_up set and the DLQ failing, the batch is left uncommitted without raising."""
    rig = _rig(dead_letter_failures=1000)
    rig.give_up.set()
    works = [_broken(rig.tracker, 0), _blocked(rig.tracker, 1)]
    await rig.processor.process_decided_batch(_batch(works))
    assert rig.store.attempts == 0
    assert rig.committer.commits == []
    assert rig.tracker.durable_point(KEY0) == 0


async def test_store_unavailable_twice_then_success_stores_once() -> None:
    """StoreUnavailable is retried: one stored batch, every record durable, no loss."""
    rig = _rig(unavailable_on={1, 2})
    works = [_work(rig.tracker, o) for o in range(4)]
    await rig.processor.process_model_batch(_batch(works))
    assert rig.store.attempts == 3
    [stored] = rig.store.stored
    assert [v.position.offset for v in stored.verdicts] == [0, 1, 2, 3]
    assert stored.offsets == {KEY0: 4}
    assert rig.tracker.durable_point(KEY0) == 4
    assert rig.committer.commits == [{KEY0: 4}]
    assert rig.processor.store_healthy


async def test_give_up_while_store_down_marks_nothing_durable() -> None:
    """When give_up is set while Postgres is down, nothing is marked, committed or published."""
    rig = _rig()
    rig.store.always_unavailable = True
    rig.store.on_unavailable = rig.give_up
    works = [_work(rig.tracker, o) for o in range(3)]
    await rig.processor.process_model_batch(_batch(works))
    assert rig.store.stored == []
    assert rig.tracker.durable_point(KEY0) == 0
    assert rig.tracker.in_flight() == 3
    assert rig.committer.commits == []
    assert rig.publisher.records == []
    assert not rig.processor.store_healthy


async def test_store_error_isolates_rejected_rows_as_dead_letters() -> None:
    """StoreError: good rows are stored one by one, bad rows become sink_rejected dead letters."""
    rig = _rig()
    works = [
        _work(rig.tracker, 0),
        _work(rig.tracker, 1, message_id="bad-1"),
        _work(rig.tracker, 2),
    ]
    await rig.processor.process_model_batch(_batch(works))
    kept = [v.message_id for b in rig.store.stored for v in b.verdicts]
    assert kept == ["m-0-0", "m-0-2"]
    letters = [d for b in rig.store.stored for d in b.dead_letters]
    assert [(d.position.offset, d.reason_code) for d in letters] == [(1, "sink_rejected")]
    assert rig.store.stored[-1].offsets == {KEY0: 3}
    assert rig.tracker.durable_point(KEY0) == 3
    assert rig.committer.commits == [{KEY0: 3}]
    assert len(rig.publisher.records) == 2


async def test_store_unavailable_during_isolation_is_retried() -> None:
    """Postgres dropping while rows are isolated is retried like any outage, with no loss."""
    rig = _rig(unavailable_on={3})
    works = [
        _work(rig.tracker, 0),
        _work(rig.tracker, 1, message_id="bad-1"),
        _work(rig.tracker, 2),
    ]
    await rig.processor.process_model_batch(_batch(works))
    kept = {v.message_id for b in rig.store.stored for v in b.verdicts}
    assert kept == {"m-0-0", "m-0-2"}
    letters = {(d.position.offset, d.reason_code) for b in rig.store.stored for d in b.dead_letters}
    assert letters == {(1, "sink_rejected")}
    assert rig.tracker.durable_point(KEY0) == 3
    assert rig.processor.store_healthy


async def test_revoked_partition_is_not_stored_or_committed() -> None:
    """A batch finishing after its partition was forgotten stores no offset for it."""
    rig = _rig()
    works = [_work(rig.tracker, 0), _work(rig.tracker, 5, partition=1)]
    rig.tracker.forget(KEY0)
    await rig.processor.process_model_batch(_batch(works))
    [stored] = rig.store.stored
    assert stored.offsets == {(TOPIC, 1): 6}
    assert rig.committer.commits == [{KEY0: None, (TOPIC, 1): 6}]


class FakeShadow:
    """Records what the processor hands the shadow, with the events seen by then."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.submitted: list[tuple[list[SourcePosition], list[str], list[str]]] = []
        self.tenants: list[list[str] | None] = []

    def submit(
        self,
        live: Sequence[object],
        model_texts: Sequence[str],
        tenants: Sequence[str] | None = None,
    ) -> None:
        positions = [v.position for v in live]  # type: ignore[attr-defined]
        self.submitted.append((positions, list(model_texts), list(self.events)))
        self.tenants.append(list(tenants) if tenants is not None else None)


async def test_the_shadow_gets_each_model_batch_once_it_is_published() -> None:
    """A model batch reaches the shadow after its write, commit and publish (so the shadow can
    delay none of them), with the live verdicts and the texts the live model scored; a decided
    batch never reaches it."""
    shadow = FakeShadow([])
    rig = _rig(shadow=shadow)
    works = [_work(rig.tracker, o) for o in range(2)]
    await rig.processor.process_model_batch(_batch(works))
    await rig.processor.process_decided_batch(_batch([_blocked(rig.tracker, 5)]))
    [(positions, texts, seen)] = shadow.submitted
    assert positions == [w.position for w in works]
    assert texts == [w.model_text for w in works]
    assert seen[-3:] == ["stored", "commit", "publish"]
    assert shadow.tenants == [[w.message.tenant for w in works if w.message is not None]]
