"""Tests for worker.app's lifecycle with fake parts handed in (``worker.parts``): a failing batch
task stops the worker loudly (error, readiness false, no commit past the batch); SIGTERM still
drains and exits cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

import worker.command as command_module
from engine.batcher import Batch
from engine.breaker import BreakerState
from engine.failpoints import FailpointRaised, Failpoints
from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey
from engine.parts import ModerationParts
from engine.policy_stage import PolicyStage
from engine.rule_stage import RuleStage
from engine.settings import BatchSettings, HttpSettings, RollupSettings
from engine.stores.carried_marks import CarriedMarks
from engine.work import Work
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.verdict_codec import VerdictRowKey
from worker.app import Worker, WorkerFailed
from worker.parts import StreamParts, build_stream_parts
from worker.settings import WorkerSettings

_TOPIC = "chat"


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def _records(count: int, *, bad_every: int = 0) -> list[Record]:
    """Benign chat messages (the model batcher's), every ``bad_every``-th one undecodable."""
    out: list[Record] = []
    for i in range(count):
        value = orjson.dumps(
            {
                "message_id": f"m-{i}",
                "group_id": "g",
                "sender_id": f"u-{i % 7}",
                "text": "see you at the station at noon",
                "sent_at": "2026-01-01T00:00:00+00:00",
            }
        )
        if bad_every and i % bad_every == bad_every - 1:
            value = b"{not json"
        out.append(Record(_TOPIC, 0, i, b"g", value))
    return out


class FakeDatabase:
    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class FakeVerdicts:
    """The verdict store: only its start-up step is reached (the processor is a fake)."""

    async def ensure_partitions(self) -> None:
        return None


class FakeMarker:
    """The verdict outbox as the carried marks send a lone mark: nothing to mark here."""

    async def mark_published(self, keys: Sequence[VerdictRowKey]) -> None:
        return None


class FakePublisher:
    """A producer whose stop can hang, as aiokafka's does while the broker is down."""

    hang_on_stop = False

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        if self.hang_on_stop:
            await asyncio.Event().wait()


@dataclass(slots=True)
class FakeBreaker:
    state: BreakerState = BreakerState.CLOSED


class FakeInference:
    def __init__(self) -> None:
        self.breaker = FakeBreaker()
        self.stopped = False

    @property
    def state(self) -> BreakerState:
        return self.breaker.state

    async def start(self, *, wait_ready: bool = True) -> None:
        return None

    async def wait_ready(self, timeout_s: float) -> None:
        return None

    async def stop(self) -> None:
        self.stopped = True

    async def probe(self) -> bool:
        return True


class FakeStrikes:
    async def prefetch(self, sender_ids: Iterable[str]) -> None:
        list(sender_ids)

    def enrich(self, message: ChatMessage) -> ChatMessage:
        return message


class FakeBackground:
    """The outbox relay and the rescorer: idle until the pipeline is done."""

    async def run(self, done: asyncio.Event, *_: object) -> None:
        await done.wait()


class StuckBackground:
    """An outbox relay caught in a publish to a broker that is down: never looks at ``done``."""

    async def run(self, done: asyncio.Event, *_: object) -> None:
        await asyncio.Event().wait()


class FakeSource:
    """Hands out the records in fetches of ``chunk``; records every commit."""

    def __init__(self, tracker: OffsetTracker, records: list[Record], chunk: int) -> None:
        self._tracker = tracker
        self._chunks = deque(records[i : i + chunk] for i in range(0, len(records), chunk))
        self.fetches = 0
        self.empty_fetches = 0
        self.commits: list[dict[PartitionKey, int | None]] = []
        self.committed_all = False
        self.stopped = False
        self.on_stop: Callable[[], Awaitable[None]] | None = None
        self.hang_on_commit = False

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        if self.on_stop is not None:
            await self.on_stop()
        self.stopped = True

    async def fetch(self, timeout_ms: int) -> list[tuple[Any, int]]:
        self.fetches += 1
        await asyncio.sleep(0.001)  # a fetch always waits on the network
        if not self._chunks:
            self.empty_fetches += 1
            await asyncio.sleep(0.01)
            return []
        return [(record, 1) for record in self._chunks.popleft()]

    @property
    def exhausted(self) -> bool:
        """Every record was handed out and a later fetch came back empty."""
        return not self._chunks and self.empty_fetches > 0

    def owns(self, key: PartitionKey, epoch: int) -> bool:
        return True

    def pause(self) -> None:
        return None

    def resume(self) -> None:
        return None

    def partitions_of(self, topic: str) -> list[int]:
        return [0]

    async def lag(self) -> dict[PartitionKey, int]:
        return {}

    async def commit(self, points: dict[PartitionKey, int | None]) -> None:
        self.commits.append(dict(points))

    async def commit_all(self) -> None:
        self.committed_all = True
        if self.hang_on_commit:
            await asyncio.Event().wait()
        await self.commit({k: self._tracker.durable_point(k) for k in self._tracker.partitions()})

    def highest_commit(self) -> int:
        return max((p for c in self.commits for p in c.values() if p is not None), default=0)


class FakeProcessor:
    """Marks a batch's records durable and commits, after a pause; passes ``during_inference``
    on model batches, so a ``raise:`` failpoint fails the batch task there."""

    def __init__(self, tracker: OffsetTracker, committer: FakeSource, failpoints: Failpoints):
        self._tracker = tracker
        self._committer = committer
        self._failpoints = failpoints
        self.store_healthy = True
        self.delay_s = 0.02
        self.gate: asyncio.Event | None = None
        self.abandon: asyncio.Event | None = None
        """Once set, a batch past its gate returns without finishing (shutdown gave up)."""
        self.cancel_cleanup_s = 0.0
        """How long a cancelled model batch takes to unwind (a query being cancelled)."""
        self.active = 0
        self.peak = 0
        self.durable: list[int] = []
        self.failed: list[int] = []
        self.give_up = asyncio.Event()
        """The parts' ``give_up`` (set by the builder's caller)."""

    async def process_model_batch(self, batch: Batch[Work]) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay_s)
            if self.gate is not None:
                await self.gate.wait()
            if self.abandon is not None and self.abandon.is_set():
                return
            try:
                self._failpoints.hit("during_inference")
            except FailpointRaised:
                self.failed.extend(w.position.offset for w in batch.items)
                raise
            await self._finish(batch)
        except asyncio.CancelledError:
            await asyncio.sleep(self.cancel_cleanup_s)
            raise
        finally:
            self.active -= 1

    async def process_decided_batch(self, batch: Batch[Work]) -> None:
        await self._finish(batch)

    async def _finish(self, batch: Batch[Work]) -> None:
        offsets = [w.position.offset for w in batch.items]
        key = batch.items[0].partition_key
        self._tracker.mark_durable(key, offsets)
        self.durable.extend(offsets)
        await self._committer.commit({key: self._tracker.durable_point(key)})


@dataclass(slots=True)
class Rig:
    records: list[Record]
    chunk: int = 25
    database: FakeDatabase = field(default_factory=FakeDatabase)
    publisher: FakePublisher = field(default_factory=FakePublisher)
    inference: FakeInference = field(default_factory=FakeInference)
    relay: FakeBackground | StuckBackground = field(default_factory=FakeBackground)
    source: FakeSource | None = None
    processor: FakeProcessor | None = None
    configure: Callable[[FakeProcessor], None] | None = None

    def make_source(
        self, _settings: object, _store: object, tracker: OffsetTracker, _drain: object
    ) -> FakeSource:
        self.source = FakeSource(tracker, self.records, self.chunk)
        return self.source

    def make_processor(self, parts: Any, _settings: object, **kwargs: Any) -> FakeProcessor:
        assert self.source is not None
        assert kwargs["acknowledger"] is self.source
        self.processor = FakeProcessor(kwargs["positions"], self.source, kwargs["failpoints"])
        self.processor.give_up = parts.give_up
        if self.configure is not None:
            self.configure(self.processor)
        return self.processor

    def parts(self, settings: WorkerSettings) -> StreamParts:
        """The stream's parts over these fakes, built by the real builder."""
        metrics = Metrics()
        moderation: Any = ModerationParts(
            metrics=metrics,
            database=self.database,  # type: ignore[arg-type]
            verdicts=FakeVerdicts(),  # type: ignore[arg-type]
            outbox=object(),  # type: ignore[arg-type]
            marks=CarriedMarks(FakeMarker()),
            publisher=self.publisher,  # type: ignore[arg-type]
            inference=self.inference,
            rules=RuleStage(RuleEngine(default_ruleset()), metrics),
            policy=PolicyStage(settings.policy, metrics),
            strikes=FakeStrikes(),  # type: ignore[arg-type]
            relay=self.relay,  # type: ignore[arg-type]
            rescorer=FakeBackground(),  # type: ignore[arg-type]
            rules_watch=None,
        )
        return build_stream_parts(
            settings,
            moderation=moderation,
            make_source=self.make_source,
            make_processor=self.make_processor,
        )

    def worker(self, settings: WorkerSettings) -> Worker:
        return Worker(settings, self.parts(settings))


def _settings(failpoint: str | None = None, *, drain_timeout_s: float = 5.0) -> WorkerSettings:
    return WorkerSettings(
        batch=BatchSettings(
            max_items=10, max_wait_s=0.05, max_in_flight=2, drain_timeout_s=drain_timeout_s
        ),
        http=HttpSettings(port=0),
        rollups=RollupSettings(refresh_interval_s=0),  # the fake database has no pool
        failpoint=failpoint,
    )


async def _http_status(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return int(line.split()[1])


async def _wait_for(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Poll a condition on the fakes' state (nothing there signals it)."""
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def test_a_raising_batch_task_stops_the_worker_loudly() -> None:
    """A batch task raising (``raise:during_inference@2``) makes ``run`` raise WorkerFailed, logs
    ``batch_task_failed`` with the type only, answers /readyz 503 while shutting down, stops
    fetching, stops the components and commits nothing past the failed batch."""
    rig = Rig(_records(200))
    worker = rig.worker(_settings("raise:during_inference@2"))
    readyz: list[int] = []

    async def probe_readyz() -> None:
        assert worker.http_port is not None
        readyz.append(await _http_status(worker.http_port, "/readyz"))

    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run(stop))
        await _wait_for(lambda: rig.source is not None)
        assert rig.source is not None
        rig.source.on_stop = probe_readyz
        with pytest.raises(WorkerFailed) as failed:
            await asyncio.wait_for(task, 10)
    source, processor = rig.source, rig.processor
    assert processor is not None
    assert isinstance(failed.value.__cause__, ExceptionGroup)
    assert failed.value.__cause__.subgroup(FailpointRaised) is not None
    events = [e for e in logs if e["event"] == "batch_task_failed"]
    assert len(events) == 1
    assert events[0]["error_type"] == "FailpointRaised"
    assert events[0]["kind"] == "model"
    assert "during_inference" not in str(events[0])  # the exception's message is never logged
    assert any(e["event"] == "worker_failed" for e in logs)
    assert readyz == [503]
    assert worker.readiness() == (False, "batch_task_failed: FailpointRaised")
    assert processor.failed
    assert source.highest_commit() <= min(processor.failed)
    assert not source.committed_all
    assert source.stopped
    assert rig.inference.stopped
    assert len(processor.durable) < len(rig.records)  # it stopped fetching and processing


async def test_fetching_stops_as_soon_as_a_batch_task_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the failed batch's siblings are still being cancelled, the consume loop fetches no
    more: the fetch count does not grow after the failure is recorded."""

    def slow_to_cancel(processor: FakeProcessor) -> None:
        processor.cancel_cleanup_s = 0.1

    rig = Rig(_records(2000), chunk=10, configure=slow_to_cancel)
    worker = rig.worker(_settings("raise:during_inference@3"))
    fetches_at_failure: list[int] = []
    original_fail = worker._supervisor.fail

    def spy(event: str, exc: Exception, **fields: object) -> None:
        assert rig.source is not None
        fetches_at_failure.append(rig.source.fetches)
        original_fail(event, exc, **fields)

    monkeypatch.setattr(worker._supervisor, "fail", spy)
    with pytest.raises(WorkerFailed):
        await asyncio.wait_for(worker.run(asyncio.Event()), 10)
    assert rig.source is not None
    assert fetches_at_failure
    assert rig.source.fetches <= fetches_at_failure[0] + 1


async def test_a_failure_in_the_consume_loop_also_stops_the_worker() -> None:
    """``raise:after_rules@5`` fails the consume task, not a batch: ``worker_task_failed`` names
    the task, readiness turns false and ``run`` raises WorkerFailed without a final commit."""
    rig = Rig(_records(50))
    worker = rig.worker(_settings("raise:after_rules@5"))
    with capture_logs() as logs, pytest.raises(WorkerFailed):
        await asyncio.wait_for(worker.run(asyncio.Event()), 10)
    events = [e for e in logs if e["event"] == "worker_task_failed"]
    assert [(e["task"], e["error_type"]) for e in events] == [("consume", "FailpointRaised")]
    assert worker.readiness() == (False, "worker_task_failed: FailpointRaised")
    assert rig.source is not None
    assert not rig.source.committed_all


async def test_sigterm_drains_in_flight_batches_and_commits_everything() -> None:
    """``stop`` while model batches are held in flight: ``run`` waits for them, never runs more
    than ``max_in_flight`` at once, returns normally and commits past the last record."""
    gate = asyncio.Event()

    def hold(processor: FakeProcessor) -> None:
        processor.gate = gate

    rig = Rig(_records(60, bad_every=6), configure=hold)
    worker = rig.worker(_settings())
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run(stop))
        await _wait_for(lambda: rig.source is not None and rig.source.exhausted)
        await _wait_for(lambda: rig.processor is not None and rig.processor.active == 2)
        assert worker.readiness() == (True, "ready")
        stop.set()
        await asyncio.sleep(0.1)
        assert not task.done()  # draining: the held batches are not abandoned
        gate.set()
        await asyncio.wait_for(task, 10)
    source, processor = rig.source, rig.processor
    assert source is not None
    assert processor is not None
    assert processor.peak == 2
    assert source.committed_all
    assert source.commits[-1] == {(_TOPIC, 0): len(rig.records)}
    assert sorted(processor.durable) == list(range(len(rig.records)))
    assert not [e for e in logs if e["event"].endswith("_failed")]
    assert any(e["event"] == "worker_stopped" for e in logs)


async def test_drain_deadline_still_lets_blocked_batches_give_up() -> None:
    """A batch blocked past ``drain_timeout_s`` after ``stop`` sees ``give_up`` (set by the
    deadline), abandons, and ``run`` ends normally without committing the blocked records."""

    def block_until_give_up(processor: FakeProcessor) -> None:
        processor.gate = processor.abandon = processor.give_up

    rig = Rig(_records(10), configure=block_until_give_up)
    worker = rig.worker(_settings(drain_timeout_s=0.2))
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    await _wait_for(lambda: rig.processor is not None and rig.processor.active == 1)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert worker.parts.moderation.give_up.is_set()
    assert rig.source is not None
    assert rig.source.committed_all
    assert rig.source.commits[-1] == {(_TOPIC, 0): 0}


async def test_shutdown_is_bounded_when_the_broker_does_not_answer() -> None:
    """With the broker down, the final commit, the consumer's stop and the producer's stop never
    return; each step is abandoned after its budget and ``run`` ends within a few seconds."""

    async def hang() -> None:
        await asyncio.Event().wait()

    rig = Rig(_records(10))
    rig.publisher.hang_on_stop = True
    worker = rig.worker(_settings(drain_timeout_s=0.2))
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run(stop))
        await _wait_for(lambda: rig.source is not None and rig.source.exhausted)
        assert rig.source is not None
        rig.source.hang_on_commit = True
        rig.source.on_stop = hang
        stop.set()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(task, 10)
        took = asyncio.get_running_loop().time() - started
    timed_out = {e["step"] for e in logs if e["event"] == "shutdown_step_timed_out"}
    assert timed_out == {"kafka_commit", "kafka_consumer", "kafka_producer"}
    assert took < 0.2 + 5.0


async def test_batches_still_blocked_after_the_drain_deadline_are_cancelled() -> None:
    """A batch blocked on something that ignores ``give_up`` (a verdict publish waiting for a
    broker that is down) is cancelled shortly after the deadline; ``run`` ends normally soon
    after ``drain_timeout_s`` and nothing of the blocked batch is committed."""

    def block_forever(processor: FakeProcessor) -> None:
        processor.gate = asyncio.Event()  # never set

    rig = Rig(_records(10), configure=block_forever)
    worker = rig.worker(_settings(drain_timeout_s=0.2))
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run(stop))
        await _wait_for(lambda: rig.processor is not None and rig.processor.active == 1)
        stop.set()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(task, 10)
        took = asyncio.get_running_loop().time() - started
    assert took < 0.2 + 2.0
    assert rig.processor is not None
    assert rig.processor.active == 0
    assert rig.processor.durable == []
    assert rig.source is not None
    assert rig.source.commits[-1] == {(_TOPIC, 0): 0}
    assert any(e["event"] == "blocked_batches_cancelled" for e in logs)
    assert not [e for e in logs if e["event"].endswith("_failed")]


async def test_a_background_task_stuck_on_the_broker_does_not_hold_the_exit() -> None:
    """The outbox relay blocked in a publish while the broker is down is cancelled once the
    pipeline is done; ``run`` ends normally within a second or so of ``stop``."""
    rig = Rig(_records(10), relay=StuckBackground())
    worker = rig.worker(_settings(drain_timeout_s=0.2))
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run(stop))
        await _wait_for(lambda: rig.source is not None and rig.source.exhausted)
        stop.set()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(task, 10)
        took = asyncio.get_running_loop().time() - started
    assert took < 2.0
    assert any(e["event"] == "background_tasks_cancelled" for e in logs)
    assert rig.source is not None
    assert rig.source.committed_all


async def test_a_stop_step_raising_cancelled_error_itself_does_not_abort_shutdown() -> None:
    """aiokafka's consumer stop can raise CancelledError from its own cancelled fetch task while
    the broker is down; that step is logged as failed and the other components still stop."""

    async def cancelled_inside() -> None:
        inner = asyncio.ensure_future(asyncio.Event().wait())
        inner.cancel()
        await inner

    rig = Rig(_records(10))
    worker = rig.worker(_settings(drain_timeout_s=0.2))
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(worker.run(stop))
        await _wait_for(lambda: rig.source is not None and rig.source.exhausted)
        assert rig.source is not None
        rig.source.on_stop = cancelled_inside
        stop.set()
        await asyncio.wait_for(task, 10)
    failed = [e for e in logs if e["event"] == "shutdown_step_failed"]
    assert [(e["step"], e["error_type"]) for e in failed] == [("kafka_consumer", "CancelledError")]
    assert rig.inference.stopped


async def test_a_failing_dispatcher_loop_is_reported_by_its_task_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error in the model dispatcher's own loop (not in a batch) arrives wrapped in its batch
    ``TaskGroup``'s group; it is still logged once, as ``worker_task_failed`` of
    ``dispatch_model`` with the inner exception's type, and ``run`` raises WorkerFailed."""
    rig = Rig(_records(30))
    worker = rig.worker(_settings())

    async def broken_batches() -> AsyncIterator[Batch[Work]]:
        await asyncio.sleep(0.05)
        raise KeyError("boom")
        yield  # pragma: no cover - makes this an async generator

    monkeypatch.setattr(worker.parts.lanes.model.batcher, "batches", broken_batches)
    with capture_logs() as logs, pytest.raises(WorkerFailed):
        await asyncio.wait_for(worker.run(asyncio.Event()), 10)
    events = [e for e in logs if e["event"].endswith("_failed") and e["event"] != "worker_failed"]
    assert [(e["event"], e.get("task"), e["error_type"]) for e in events] == [
        ("worker_task_failed", "dispatch_model", "KeyError")
    ]
    assert "boom" not in str(events)
    assert worker.readiness() == (False, "worker_task_failed: KeyError")


@pytest.mark.parametrize(("outcome", "code"), [(None, 0), (WorkerFailed("x"), 1)])
def test_the_command_exits_1_when_the_worker_failed(
    monkeypatch: pytest.MonkeyPatch, outcome: WorkerFailed | None, code: int
) -> None:
    """``modstream worker``'s handler returns 0 after a clean stop and 1 after WorkerFailed."""

    async def run_until_signalled(_settings: WorkerSettings) -> None:
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(command_module, "configure_logging", lambda _level: None)
    monkeypatch.setattr(command_module, "_run_until_signalled", run_until_signalled)
    assert command_module._run_worker(argparse.Namespace()) == code
