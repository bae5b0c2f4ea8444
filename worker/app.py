"""``modstream worker``: wires source, rules, batchers, processor, stores and publisher; runs them.

Lifecycle (arq-style): a signal only sets ``stop``; the consume loop stops fetching, the batchers
flush what they hold, in-flight batches drain within ``batch.drain_timeout_s``, offsets are
committed, and the process exits 0.

Failure is structured too: every background task runs in one ``TaskGroup`` and every batch task
in a ``TaskGroup`` of its dispatcher (at most ``batch.max_in_flight`` at once), so no exception
goes unobserved. The first unexpected one is logged (``batch_task_failed`` or
``worker_task_failed``, with the exception's type and where it was raised, never its message),
``/readyz`` answers 503 from that moment, fetching stops, the other tasks are cancelled, the
components shut down, ``run`` raises ``WorkerFailed`` and the process exits 1. Nothing commits
past the failed batch: its records were never marked durable, so neither the offsets stored with
later batches nor a Kafka commit can pass them, and the restarted worker reads them again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time
import traceback
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from common.kafka_access import KafkaAccessError, verify_kafka_access
from common.kafka_client import KafkaClientConfigError
from common.logs import configure_logging, get_logger
from pipelines.canonical import canonicalize
from pipelines.decode import DecodeError, decode_message
from pipelines.messages import SourcePosition
from pipelines.rules import RuleEngine, default_ruleset, load_ruleset
from worker.backpressure import Backpressure, FlowAction
from worker.batcher import Batch, MicroBatcher
from worker.breaker import BreakerState
from worker.consumer_lag import ConsumerLagProbe
from worker.failpoints import Failpoints
from worker.http import HealthServer
from worker.inference import InferenceUnavailable, TritonModerationClient
from worker.metrics import Metrics
from worker.offsets import OffsetTracker, PartitionKey
from worker.outbox import VerdictOutbox
from worker.processing import BatchProcessor, Work
from worker.publisher import KafkaPublisher
from worker.rescore import Rescorer
from worker.rules_watch import RulesWatcher
from worker.sender_strikes import StrikeCache
from worker.settings import WorkerSettings
from worker.source import KafkaSource
from worker.stores.database import Database
from worker.stores.partitions import ensure_verdict_partitions
from worker.stores.pending_texts import PendingTextStore
from worker.stores.strikes import StrikeStore
from worker.stores.verdict_batches import VerdictBatchStore
from worker.stores.verdict_outbox import VerdictOutboxStore

__all__ = ["Worker", "WorkerFailed", "register"]

_log = get_logger(__name__)
_FETCH_TIMEOUT_MS = 500
_YIELD_EVERY_RECORDS = 64
_LAG_PROBE_S = 0.5
_EXIT_FAILED = 1
_GIVE_UP_GRACE_S = 0.25
"""After the drain deadline, how long batches get to notice ``give_up`` before being cancelled."""
_BACKGROUND_STOP_S = 0.5
"""After the pipeline is done, how long background loops get to see ``done`` before being
cancelled."""


async def _stop_within(step: str, stop: Callable[[], Awaitable[None]], timeout_s: float) -> None:
    """One shutdown step, abandoned after ``timeout_s`` (a client waiting on a broker that is
    down would otherwise hold the process long after the drain deadline). A step that fails,
    including with a ``CancelledError`` of its own (aiokafka's consumer re-raises its cancelled
    fetch task's), is logged and the shutdown goes on; a cancellation of this task itself still
    propagates."""
    try:
        async with asyncio.timeout(timeout_s):
            await stop()
    except TimeoutError:
        _log.warning("shutdown_step_timed_out", step=step, timeout_s=timeout_s)
    except asyncio.CancelledError as exc:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        _log.warning("shutdown_step_failed", step=step, error_type=type(exc).__name__)
    except Exception as exc:
        _log.warning("shutdown_step_failed", step=step, error_type=type(exc).__name__)


def _timestamp_s(record: Any) -> float | None:
    """The record's Kafka timestamp in epoch seconds (``None`` when it has none)."""
    timestamp = getattr(record, "timestamp", None)
    return timestamp / 1000.0 if isinstance(timestamp, int) and timestamp >= 0 else None


class WorkerFailed(RuntimeError):
    """A task of the worker raised unexpectedly; the worker stopped and shut down (the task's
    exceptions are chained as the cause)."""


def _first_leaf(group: ExceptionGroup[Exception]) -> Exception:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, ExceptionGroup) else first


def _raised_at(exc: BaseException) -> str:
    """``file.py:line in function`` of the innermost frame: where, without the message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


class Worker:
    _strikes: StrikeCache
    """Moderators' strikes per sender, fed to the rules (set when ``run`` opens the database)."""

    def __init__(self, settings: WorkerSettings, *, metrics: Metrics | None = None) -> None:
        self._settings = settings
        self.metrics = metrics or Metrics()
        rules_path = settings.rules.path
        ruleset = load_ruleset(rules_path) if rules_path else default_ruleset()
        self._engine = RuleEngine(ruleset)
        self._thresholds = settings.policy
        self._tracker = OffsetTracker()
        self._failpoints = Failpoints(settings.failpoint)
        self._backpressure = Backpressure(
            settings.batch.max_records_in_flight,
            settings.batch.resume_ratio,
            high_bytes=settings.batch.max_bytes_in_flight,
        )
        # The queues hold every record that may be in flight (the limit plus one fetch), so
        # ``put`` never blocks the consume loop: backpressure is pause/resume, not a stall.
        queue_items = settings.batch.max_records_in_flight + settings.kafka.max_poll_records
        self._batches_running: dict[str, int] = {"model": 0, "decided": 0}
        target_ms = settings.batch.target_latency_ms
        self._model_batcher: MicroBatcher[Work] = MicroBatcher(
            settings.batch.max_items,
            settings.batch.max_wait_s,
            queue_items=queue_items,
            # Below the upper bounds a batch closes once the model has nothing in flight, or
            # when its oldest message has waited target_latency_ms.
            target_latency_s=target_ms / 1000.0 if target_ms else None,
            idle=lambda: self._batches_running["model"] == 0,
        )
        # Rule blocks and dead letters need no model: they flush almost at once.
        self._decided_batcher: MicroBatcher[Work] = MicroBatcher(
            settings.batch.max_items, 0.05, queue_items=queue_items
        )
        self._give_up = asyncio.Event()
        self._started = False
        self._failure: str | None = None
        self._processor: BatchProcessor | None = None
        self._source: KafkaSource | None = None
        self.http_port: int | None = None

    # -- readiness ------------------------------------------------------------------------

    def readiness(self) -> tuple[bool, str]:
        if self._failure is not None:
            return False, self._failure
        if not self._started:
            return False, "starting"
        if self._processor is not None and not self._processor.store_healthy:
            return False, "postgres unavailable"
        return True, "ready"

    # -- run ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        s = self._settings
        async with AsyncExitStack() as stack:
            database = Database(s.postgres)
            await database.start()
            stack.push_async_callback(_stop_within, "postgres", database.stop, 1.0)
            await ensure_verdict_partitions(database)
            self._strikes = StrikeCache(StrikeStore(database), ttl_s=s.rules.strikes_ttl_s)
            batches = VerdictBatchStore(database, s.kafka.group_id)
            verdict_outbox = VerdictOutboxStore(database)
            publisher = KafkaPublisher(s.kafka)
            await publisher.start()
            stack.push_async_callback(_stop_within, "kafka_producer", publisher.stop, 0.5)
            inference = TritonModerationClient(s.triton, metrics=self.metrics.replicas)
            await inference.start(wait_ready=False)
            stack.push_async_callback(_stop_within, "triton", inference.stop, 0.5)
            try:
                await inference.wait_ready(s.triton.ready_timeout_s)
            except InferenceUnavailable as exc:
                # Keep going: verdicts are rules-only (pending_model) until the model answers.
                _log.warning("triton_not_ready", error=str(exc))
            source = KafkaSource(s.kafka, batches, self._tracker, self._drain_partitions)
            self._source = source
            self._processor = BatchProcessor(
                inference=inference,
                store=batches,
                outbox=verdict_outbox,
                publisher=publisher,
                committer=source,
                tracker=self._tracker,
                thresholds=self._thresholds,
                verdict_topic=s.kafka.verdict_topic,
                metrics=self.metrics,
                give_up=self._give_up,
                failpoints=self._failpoints,
            )
            outbox = VerdictOutbox(
                verdict_outbox,
                publisher,
                s.kafka.verdict_topic,
                min_age_s=s.reliability.outbox_min_age_s,
                batch_items=s.reliability.outbox_batch_items,
                on_relayed=self.metrics.outbox_relayed_total.inc,
                on_backlog=self.metrics.outbox_backlog_records.set,
            )
            rescorer = Rescorer(
                inference=inference,
                store=PendingTextStore(database),
                outbox=verdict_outbox,
                publisher=publisher,
                thresholds=self._thresholds,
                verdict_topic=s.kafka.verdict_topic,
                batch_items=s.reliability.rescore_batch_items,
                on_rescored=self.metrics.rescored_total.inc,
                on_rejected=self.metrics.rescore_rejected_total.inc,
            )
            health = HealthServer(s.http.host, s.http.port, self.metrics, self.readiness)
            await health.start()
            stack.push_async_callback(health.stop)
            self.http_port = health.port
            await source.start()
            stack.push_async_callback(_stop_within, "kafka_consumer", source.stop, 1.5)
            self._started = True
            _log.info("worker_started", topic=s.kafka.input_topic, http_port=health.port)
            done = asyncio.Event()
            processor = self._processor
            try:
                await self._supervise(stop, done, source, processor, inference, outbox, rescorer)
            except ExceptionGroup as group:
                if self._failure is None:
                    raise
                # Shut down without ``commit_all``: the failed batch's records stay pending.
                _log.error("worker_failed", in_flight=self._tracker.in_flight())
                raise WorkerFailed(self._failure) from group
            # Best effort: PostgreSQL holds the offsets; a broker that is down must not hold the
            # exit (every stop step below is bounded too, about 4 s in all).
            await _stop_within("kafka_commit", source.commit_all, 0.5)
            _log.info("worker_stopped", in_flight=self._tracker.in_flight())

    async def _supervise(
        self,
        stop: asyncio.Event,
        done: asyncio.Event,
        source: KafkaSource,
        processor: BatchProcessor,
        inference: TritonModerationClient,
        outbox: VerdictOutbox,
        rescorer: Rescorer,
    ) -> None:
        """Run the pipeline and the background tasks in one ``TaskGroup`` until the pipeline
        ends (after ``stop``) or a task fails (the group then raises)."""
        s = self._settings
        async with asyncio.TaskGroup() as tg:
            pipeline = [
                tg.create_task(self._watched("consume", self._consume(source, stop))),
                tg.create_task(
                    self._watched(
                        "dispatch_model",
                        self._dispatch(
                            "model",
                            self._model_batcher,
                            processor.process_model_batch,
                            s.batch.max_in_flight,
                        ),
                    )
                ),
                tg.create_task(
                    self._watched(
                        "dispatch_decided",
                        self._dispatch(
                            "decided", self._decided_batcher, processor.process_decided_batch, 1
                        ),
                    )
                ),
            ]
            background = [
                tg.create_task(self._watched("watch_lag", self._watch_lag(done))),
                tg.create_task(
                    self._watched("watch_breaker", self._watch_breaker(inference, done))
                ),
                tg.create_task(
                    self._watched(
                        "consumer_lag",
                        ConsumerLagProbe(source, self._tracker, self.metrics).run(done),
                    )
                ),
            ]
            topic = s.kafka.input_topic

            def owned() -> list[int]:
                return source.partitions_of(topic)

            rel = s.reliability
            background.append(
                tg.create_task(
                    self._watched("outbox", outbox.run(done, rel.outbox_interval_s, topic, owned))
                )
            )
            background.append(
                tg.create_task(
                    self._watched(
                        "rescore",
                        rescorer.run(done, rel.rescore_interval_s, inference.probe, topic, owned),
                    )
                )
            )
            if s.rules.path is not None and s.rules.reload_interval_s > 0:
                watcher = RulesWatcher(
                    s.rules.path,
                    s.rules.reload_interval_s,
                    self._install_rules,
                    on_reject=lambda _exc: self.metrics.rules_reloads_total.labels(
                        "rejected"
                    ).inc(),
                )
                background.append(tg.create_task(self._watched("rules_watch", watcher.run(done))))
            tg.create_task(
                self._watched("drain_deadline", self._drain_deadline(stop, done, pipeline))
            )
            await asyncio.wait(pipeline)
            done.set()
            # Background loops stop at ``done``, unless one is blocked on a dependency that is
            # down (the outbox relay publishing to an absent broker): cancel those. What they
            # leave unpublished stays in the outbox for the next start.
            _, stuck = await asyncio.wait(background, timeout=_BACKGROUND_STOP_S)
            if stuck:
                _log.warning("background_tasks_cancelled", tasks=len(stuck))
                for task in stuck:
                    task.cancel()

    # -- failure --------------------------------------------------------------------------

    def _fail(self, event: str, exc: Exception, **fields: object) -> None:
        """Record an unexpected exception: readiness turns false at once and fetching stops.
        Every failure is logged (type and place only); the first one names the readiness."""
        if self._failure is None:
            self._failure = f"{event}: {type(exc).__name__}"
        _log.error(event, error_type=type(exc).__name__, raised_at=_raised_at(exc), **fields)

    async def _watched(self, task: str, work: Awaitable[None]) -> None:
        """Await a background task; an unexpected exception is recorded, then re-raised so the
        ``TaskGroup`` cancels the rest."""
        try:
            await work
        except ExceptionGroup as group:
            # A dispatcher's: its batch failures were recorded where they happened.
            if self._failure is None:
                self._fail("worker_task_failed", _first_leaf(group), task=task)
            raise
        except Exception as exc:
            self._fail("worker_task_failed", exc, task=task)
            raise

    async def _drain_deadline(
        self, stop: asyncio.Event, done: asyncio.Event, pipeline: list[asyncio.Task[None]]
    ) -> None:
        """After ``stop``, give the pipeline ``drain_timeout_s``, then let blocked work give up;
        what is still blocked a moment later (waiting on something that does not watch
        ``give_up``, such as a publish to a broker that is down) is cancelled. Cancelling loses
        nothing: what is not durable is not committed and is read again, and stored verdicts not
        yet published are left to the outbox relay, exactly as after a SIGKILL."""
        stop_task = asyncio.ensure_future(stop.wait())
        done_task = asyncio.ensure_future(done.wait())
        try:
            await asyncio.wait({stop_task, done_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Also when cancelled (another task failed): leave no waiter pending.
            stop_task.cancel()
            done_task.cancel()
        if done.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), self._settings.batch.drain_timeout_s)
        if not done.is_set():
            _log.warning("drain_deadline_passed")
        self._give_up.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), _GIVE_UP_GRACE_S)
        if done.is_set():
            return
        _log.warning("blocked_batches_cancelled", in_flight=self._tracker.in_flight())
        for task in pipeline:
            task.cancel()

    async def _consume(self, source: KafkaSource, stop: asyncio.Event) -> None:
        max_bytes = self._settings.kafka.max_message_bytes
        try:
            while not stop.is_set() and self._failure is None:
                self._apply_backpressure(source)
                fetched = await source.fetch(_FETCH_TIMEOUT_MS)
                if fetched:
                    self._failpoints.hit("after_fetch")
                works = [
                    (self._decode(record, max_bytes), epoch)
                    for record, epoch in fetched
                    if source.owns((record.topic, record.partition), epoch)
                ]
                # One look-up of moderators' strikes for this fetch's senders (cached).
                await self._strikes.prefetch(w.message.sender_id for w, _ in works if w.message)
                for handled, (work, epoch) in enumerate(works, start=1):
                    if not source.owns(work.partition_key, epoch):
                        continue  # revoked (or re-assigned) since this fetch returned
                    await self._route(work)
                    if handled % _YIELD_EVERY_RECORDS == 0:
                        await asyncio.sleep(0)  # let heartbeats and batches run
                    if stop.is_set() or self._failure is not None:
                        break
        finally:
            await self._decided_batcher.close()
            await self._model_batcher.close()

    def _decode(self, record: Any, max_bytes: int) -> Work:
        """Register the record with the offset tracker and decode it (errors are kept)."""
        position = SourcePosition(record.topic, record.partition, record.offset)
        size_bytes = len(record.value or b"") + len(record.key or b"")
        self._tracker.start((record.topic, record.partition), record.offset, size_bytes)
        self.metrics.records_total.inc()
        work = Work(position, record.key, time.monotonic(), produced_at=_timestamp_s(record))
        try:
            work.message = decode_message(record.value, max_bytes=max_bytes)
        except DecodeError as exc:
            work.error, work.raw = exc, record.value
        return work

    async def _route(self, work: Work) -> None:
        """Dead letters and rule blocks to the decided batcher, the rest to the model batcher."""
        if work.message is None:
            await self._decided_batcher.put(work)
            return
        work.message = self._strikes.enrich(work.message)
        # One canonical text for both: the rules match it, the model scores it.
        canonical = canonicalize(work.message.text)
        work.outcome = self._engine.evaluate(work.message, canonical)
        work.model_text = canonical.text
        self._failpoints.hit("after_rules")
        for hit in work.outcome.hits:
            self.metrics.rule_hits_total.labels(hit.category).inc()
        if work.outcome.is_decisive:
            await self._decided_batcher.put(work)
        else:
            await self._model_batcher.put(work)

    def _apply_backpressure(self, source: KafkaSource) -> None:
        in_flight = self._tracker.in_flight()
        in_flight_bytes = self._tracker.in_flight_bytes()
        self.metrics.in_flight_records.set(in_flight)
        self.metrics.in_flight_bytes.set(in_flight_bytes)
        action = self._backpressure.update(in_flight, in_flight_bytes)
        if action is FlowAction.PAUSE:
            source.pause()
            self.metrics.consumer_paused.set(1)
            _log.warning("consumer_paused", in_flight=in_flight, in_flight_bytes=in_flight_bytes)
        elif action is FlowAction.RESUME:
            source.resume()
            self.metrics.consumer_paused.set(0)
            _log.info("consumer_resumed", in_flight=in_flight)

    def _install_rules(self, engine: RuleEngine) -> None:
        # Records already evaluated keep their outcome; every later record uses the new rules.
        self._engine = engine
        self.metrics.rules_reloads_total.labels("installed").inc()

    async def _dispatch(
        self,
        kind: str,
        batcher: MicroBatcher[Work],
        handle: Callable[[Batch[Work]], Awaitable[None]],
        slots: int,
    ) -> None:
        """Run up to ``slots`` batches at once, each a task of one ``TaskGroup``; return when the
        batcher is closed and every batch finished. A batch that raises is recorded, the group
        cancels the others and raises (nothing is left running, no exception is lost)."""
        semaphore = asyncio.Semaphore(slots)

        async def run_one(batch: Batch[Work]) -> None:
            try:
                await handle(batch)
            except Exception as exc:
                self._fail("batch_task_failed", exc, kind=kind, items=len(batch.items))
                raise
            finally:
                self._batches_running[kind] -= 1
                semaphore.release()

        async with asyncio.TaskGroup() as batches:
            async for batch in batcher.batches():
                await semaphore.acquire()
                # Counted from creation, so the next batch never sees a just-handed-off one as idle.
                self._batches_running[kind] += 1
                batches.create_task(run_one(batch))

    async def _drain_partitions(self, keys: list[PartitionKey]) -> None:
        """Revocation: flush the batchers and wait (bounded) for those partitions' records."""
        await self._decided_batcher.flush()
        await self._model_batcher.flush()
        deadline = time.monotonic() + self._settings.kafka.rebalance_timeout_ms / 2000.0
        # Polling is deliberate: completion is spread over many batch tasks and partitions.
        while self._tracker.pending_in(keys) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if self._tracker.pending_in(keys):
            _log.warning("revoke_with_records_in_flight", records=self._tracker.pending_in(keys))

    async def _watch_lag(self, done: asyncio.Event) -> None:
        while not done.is_set():
            before = time.perf_counter()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), _LAG_PROBE_S)
            lag = time.perf_counter() - before - _LAG_PROBE_S
            self.metrics.event_loop_lag_seconds.set(max(0.0, lag))
            self.metrics.open_tasks.set(len(asyncio.all_tasks()))

    async def _watch_breaker(self, inference: TritonModerationClient, done: asyncio.Event) -> None:
        while not done.is_set():
            # Half-open replicas ask the model-ready endpoint: close or re-open (no call else).
            await inference.probe()
            self.metrics.breaker_open.set(int(inference.breaker.state is not BreakerState.CLOSED))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1.0)


_EXIT_KAFKA_SETTINGS = 2
_EXIT_KAFKA_ACCESS = 3


async def _check_kafka_access(settings: WorkerSettings) -> None:
    """Refused Kafka credentials or an untrusted broker (exit 3), and security files that
    cannot be used (exit 2), end the command with one logged event instead of endless retries."""
    try:
        await verify_kafka_access(settings.kafka)
    except KafkaAccessError as exc:
        _log.error(exc.event, broker=exc.broker, reason=exc.reason, error=str(exc))
        raise SystemExit(_EXIT_KAFKA_ACCESS) from exc
    except KafkaClientConfigError as exc:
        _log.error("kafka_settings_unusable", error=str(exc))
        raise SystemExit(_EXIT_KAFKA_SETTINGS) from exc


async def _run_until_signalled(settings: WorkerSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await _check_kafka_access(settings)
    await Worker(settings).run(stop)


def _run(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    configure_logging(settings.log_level)
    try:
        asyncio.run(_run_until_signalled(settings))
    except WorkerFailed:
        return _EXIT_FAILED  # already logged where it happened, without message text
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("worker", help="run the moderation worker until SIGTERM")
    parser.set_defaults(handler=_run)
