"""The online service: its parts (``online.parts``) behind the gRPC server, run until stopped.

The parts are the daemon's (PostgreSQL pool and stores, Kafka publisher, inference client with
its deadline, retries and circuit breaker, rule stage and its file watch, strike cache, the
``BatchProcessor``, outbox relay and re-scorer), built once by ``engine.parts``; the relay and
the re-scorer run over the online rows only (source_topic ``online``), the stream's workers keep
their own. Every task runs under the worker's supervisor (``engine.supervisor``): a task that
fails stops the service loudly, and shutdown steps are bounded.

Shutdown (SIGTERM/SIGINT): health turns ``NOT_SERVING``, the server stops taking calls and gives
running ones ``grace_s``, the collector runs what is queued, and writes still blocked on an
unreachable PostgreSQL are abandoned ``drain_s`` later (their callers have long had an error;
nothing was acknowledged for them).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from contextlib import AsyncExitStack

from grpc import aio
from grpc_health.v1 import health

from common.api_tokens import TokenReader
from common.logs import get_logger
from engine.breaker import BreakerState
from engine.http import HealthServer
from engine.inference import InferenceError
from engine.supervisor import Supervisor
from online.auth import TokenCheck
from online.collector import CollectorStats
from online.errors import OnlineError
from online.parts import OnlineParts, build_online_parts
from online.perspective.analyze import Analyzer
from online.perspective.http import AnalyzeApp, PerspectiveServer
from online.perspective.mapping import load_mapping
from online.perspective.quota import KeyQuota
from online.server import ModerationServicer, build_server, server_credentials, set_health
from online.settings import OnlineSettings

__all__ = ["OnlineFailed", "OnlineService", "freeze_startup_objects", "serve_until_signalled"]

_log = get_logger(__name__)
ANALYZE_METHOD = "AnalyzeComment"
"""``comments:analyze`` calls in ``modstream_online_calls_total`` and ``_call_seconds``."""


class OnlineFailed(OnlineError):
    """A task of the service raised unexpectedly; it stopped (the exceptions are the cause)."""


class OnlineService:
    """The running service; ``port`` is set once it listens, ``ready`` then."""

    def __init__(
        self,
        settings: OnlineSettings,
        parts: OnlineParts | None = None,
        *,
        grace_s: float = 5.0,
        drain_s: float = 10.0,
    ) -> None:
        self._settings = settings
        self.parts = parts or build_online_parts(settings)
        self._grace_s = grace_s
        self._drain_s = drain_s
        self.metrics = self.parts.moderation.metrics
        self.online_metrics = self.parts.metrics
        self.port: int | None = None
        self.http_port: int | None = None
        """Where ``/metrics``, ``/healthz`` and ``/readyz`` answer, once started."""
        self.perspective_port: int | None = None
        """Where ``POST /v1alpha1/comments:analyze`` answers, once started (if enabled)."""
        self._perspective: PerspectiveServer | None = None
        self._store_ok = False
        self._stopping = False
        self.ready = asyncio.Event()
        self.stats: CollectorStats = self.parts.collector.stats

    async def run(self, stop: asyncio.Event) -> None:
        s, parts = self._settings, self.parts
        o = s.online
        async with AsyncExitStack() as stack:
            await parts.moderation.open(stack, ready_timeout_s=None)
            servicer = ModerationServicer(
                parts.moderator, o, max_message_bytes=s.kafka.max_message_bytes
            )
            health_servicer = health.aio.HealthServicer()
            await set_health(health_servicer, False)
            database = parts.moderation.database

            def token_reader() -> TokenReader:
                return database.pool()

            tokens = TokenCheck(token_reader, cache_s=o.token_cache_s) if o.require_token else None
            server = build_server(servicer, health_servicer, parts.metrics, tokens)
            address = f"{o.host}:{o.port}"
            credentials = server_credentials(o)
            if credentials is None:
                self.port = server.add_insecure_port(address)
            else:
                self.port = server.add_secure_port(address, credentials)
            http = HealthServer(s.http.host, s.http.port, self.metrics, self.readiness)
            await http.start()
            stack.push_async_callback(http.stop)
            self.http_port = http.port
            if s.perspective.enabled:
                self._perspective = self._perspective_server(tokens)
                await self._perspective.start()
                stack.push_async_callback(self._perspective.stop)
                self.perspective_port = self._perspective.port
            await server.start()
            stack.push_async_callback(server.stop, None)
            _log.info("online_started", port=self.port, tls=o.tls, token=o.require_token)
            supervisor = Supervisor(
                parts.moderation.give_up,
                self._grace_s + self._drain_s,
                lambda: parts.moderator.admitted,
                service="online",
            )

            async def watch_health(done: asyncio.Event) -> None:
                await self._watch_health(health_servicer, done)

            self.ready.set()
            try:
                await supervisor.run(
                    stop,
                    pipeline={
                        "collect": parts.collector.run(),
                        "serve": self._serve(stop, server, health_servicer),
                    },
                    background={"watch_health": watch_health, **parts.loops},
                )
            except ExceptionGroup as group:
                if supervisor.failure is None:
                    raise
                _log.error("online_failed", admitted=parts.moderator.admitted)
                raise OnlineFailed(supervisor.failure) from group
            _log.info("online_stopped")

    def _perspective_server(self, tokens: TokenCheck | None) -> PerspectiveServer:
        """``comments:analyze`` over this service's moderator, rules and model
        (``online.perspective``), behind the same tokens as ``CheckMessage``."""
        s, parts = self._settings, self.parts
        p = s.perspective
        analyzer = Analyzer(
            moderator=parts.moderator,
            rules=parts.moderation.rules,
            model=parts.moderation.inference,
            keys=tokens,
            quota=KeyQuota(qps=p.qps, burst=p.burst),
            mapping=load_mapping(),
            model_timeout_s=s.online.model_budget_ms / 1000.0,
        )
        metrics = parts.metrics
        seconds = metrics.call_seconds.labels(ANALYZE_METHOD)

        def record(code: str, elapsed_s: float) -> None:
            seconds.observe(elapsed_s)
            metrics.calls_total.labels(ANALYZE_METHOD, code).inc()

        app = AnalyzeApp(analyzer.analyze, max_body_bytes=p.max_body_bytes, record=record)
        return PerspectiveServer(app, p.host, p.port, grace_s=self._grace_s)

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: ready while PostgreSQL answers (a verdict can be made durable; with the
        model down checks get rules-only verdicts), not before start nor once stopping."""
        if self._stopping:
            return False, "stopping"
        if not self.ready.is_set():
            return False, "starting"
        if not self._store_ok:
            return False, "postgres unavailable"
        return True, "ready"

    async def _serve(
        self, stop: asyncio.Event, server: aio.Server, health_servicer: health.aio.HealthServicer
    ) -> None:
        """Serve until ``stop``; then refuse new calls, let running ones finish within
        ``grace_s`` and close the collector (it ends once what is queued is answered)."""
        await stop.wait()
        self._stopping = True
        _log.info("online_stopping", admitted=self.parts.moderator.admitted)
        await health_servicer.enter_graceful_shutdown()
        await server.stop(self._grace_s)
        if self._perspective is not None:
            await self._perspective.stop()
        await self.parts.collector.close()

    async def _watch_health(
        self, health_servicer: health.aio.HealthServicer, done: asyncio.Event
    ) -> None:
        """SERVING while the model and PostgreSQL answer; drives the replicas' half-open probes
        (and, with ``triton.grpc_dns``, the lookups of the replicas' name)."""
        model = self.parts.moderation.inference
        claims = self.parts.claims
        metrics = self.metrics
        interval = self._settings.online.health_interval_s
        while not done.is_set():
            await model.probe()  # no call unless a replica is half-open
            try:
                await model.wait_ready(0.0)
                model_ok = True
            except InferenceError:
                model_ok = False
            store_ok = self._store_ok = await claims.ping()
            if not done.is_set():
                await set_health(health_servicer, model_ok and store_ok)
            metrics.breaker_open.set(int(model.state is not BreakerState.CLOSED))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), interval)


def freeze_startup_objects() -> None:
    """Take what start-up built out of the garbage collector's generations (``gc.freeze``).

    The rule engine, its word lists and readings, the clients and the generated messages are
    some 300,000 objects that live as long as the process. Left in the oldest generation, each
    full collection walks all of them, with the event loop stopped: 188-205 ms measured on the
    loaded 2-core development box (BENCHMARKS.md, "Online"), enough on its own to put a run's
    p99 past 50 ms.
    Frozen, a full collection walks only what calls made since. Objects of start-up that are
    dropped later (a reloaded rule set replaces the first one) are still freed by reference
    counting; only reference cycles among them would stay, once, as they were made once.
    """
    gc.collect()
    gc.freeze()


async def serve_until_signalled(settings: OnlineSettings) -> None:
    """Run the service until SIGTERM or SIGINT (the process is the service's: its parts are
    frozen for the collector once built, see :func:`freeze_startup_objects`)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    service = OnlineService(settings)
    freeze_startup_objects()
    await service.run(stop)
