"""The moderation worker: runs the stream's parts (``worker.parts``) until stopped or failed.

Lifecycle (arq-style): a signal only sets ``stop``; the consume loop stops fetching, the lanes
flush what they hold, in-flight batches drain within ``batch.drain_timeout_s``, offsets are
committed, and ``run`` returns.

Failure is structured too (``engine.supervisor``): every task runs in one ``TaskGroup`` and every
batch in a ``TaskGroup`` of its lane, so no exception goes unobserved. The first unexpected one
is logged (``batch_task_failed`` or ``worker_task_failed``, with the exception's type and where
it was raised, never its message), ``/readyz`` answers 503 from that moment, fetching stops, the
other tasks are cancelled, the parts shut down and ``run`` raises ``WorkerFailed``. Nothing
commits past the failed batch: its records were never marked durable, so neither the offsets
stored with later batches nor a Kafka commit can pass them, and the restarted worker reads them
again.
"""

from __future__ import annotations

import asyncio
import functools
from contextlib import AsyncExitStack

from common.logs import get_logger
from engine.http import HealthServer
from engine.supervisor import Supervisor, stop_within
from worker.consume import ConsumeLoop
from worker.errors import WorkerError
from worker.parts import StreamParts, build_stream_parts
from worker.settings import WorkerSettings
from worker.watchers import watch_lag

__all__ = ["Worker", "WorkerFailed"]

_log = get_logger(__name__)


class WorkerFailed(WorkerError, RuntimeError):
    """A task of the worker raised unexpectedly; the worker stopped and shut down (the task's
    exceptions are chained as the cause)."""


class Worker:
    """Runs :class:`StreamParts` (built from ``settings`` when none are handed in)."""

    def __init__(self, settings: WorkerSettings, parts: StreamParts | None = None) -> None:
        self._settings = settings
        self.parts = parts or build_stream_parts(settings)
        self.metrics = self.parts.moderation.metrics
        tracker = self.parts.tracker
        self._supervisor = Supervisor(
            self.parts.moderation.give_up, settings.batch.drain_timeout_s, tracker.in_flight
        )
        self._consume = ConsumeLoop(
            source=self.parts.source,
            tracker=tracker,
            strikes=self.parts.moderation.strikes,
            rules=self.parts.moderation.rules,
            lanes=self.parts.lanes,
            backpressure=self.parts.backpressure,
            failpoints=self.parts.failpoints,
            metrics=self.metrics,
            max_message_bytes=settings.kafka.max_message_bytes,
            failed=lambda: self._supervisor.failure is not None,
        )
        self._started = False
        self.http_port: int | None = None

    def readiness(self) -> tuple[bool, str]:
        if self._supervisor.failure is not None:
            return False, self._supervisor.failure
        if not self._started:
            return False, "starting"
        if not self.parts.processor.store_healthy:
            return False, "postgres unavailable"
        return True, "ready"

    async def run(self, stop: asyncio.Event) -> None:
        s, parts = self._settings, self.parts
        async with AsyncExitStack() as stack:
            await parts.moderation.open(stack, ready_timeout_s=s.triton.ready_timeout_s)
            health = HealthServer(s.http.host, s.http.port, self.metrics, self.readiness)
            await health.start()
            stack.push_async_callback(health.stop)
            self.http_port = health.port
            await parts.source.start()
            stack.push_async_callback(stop_within, "kafka_consumer", parts.source.stop, 1.5)
            self._started = True
            _log.info("worker_started", topic=s.kafka.input_topic, http_port=health.port)
            lanes, supervisor = parts.lanes, self._supervisor
            try:
                await supervisor.run(
                    stop,
                    pipeline={
                        "consume": self._consume.run(stop),
                        "dispatch_model": lanes.model.run(supervisor.batch_failed),
                        "dispatch_decided": lanes.decided.run(supervisor.batch_failed),
                    },
                    background={
                        "watch_lag": functools.partial(watch_lag, self.metrics),
                        **parts.loops,
                    },
                )
            except ExceptionGroup as group:
                if supervisor.failure is None:
                    raise
                # Shut down without ``commit_all``: the failed batch's records stay pending.
                _log.error("worker_failed", in_flight=parts.tracker.in_flight())
                raise WorkerFailed(supervisor.failure) from group
            # Best effort: PostgreSQL holds the offsets; a broker that is down must not hold the
            # exit (every stop step is bounded too, about 4 s in all).
            await stop_within("kafka_commit", parts.source.commit_all, 0.5)
            _log.info("worker_stopped", in_flight=parts.tracker.in_flight())
