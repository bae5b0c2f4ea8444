"""The online service's wiring: the daemon's parts behind the gRPC server, run until stopped.

Parts reused from the daemon: the PostgreSQL pool (without asyncpg's reset query on each
checkout: nothing here changes session state) and stores, the Kafka publisher, the Triton
client (with its deadline, retries and circuit breaker), the rule engine and its file watcher,
the strikes cache, the ``BatchProcessor`` (decide, one transaction, publish after durable), the
outbox relay and the re-scorer. The relay and the re-scorer run over the online rows only
(source_topic ``online``); the stream's workers keep their own.

Shutdown (SIGTERM/SIGINT): health turns ``NOT_SERVING``, the server stops taking calls and gives
running ones ``grace_s``, the collector runs what is queued, and writes still blocked on an
unreachable PostgreSQL are abandoned after ``drain_s`` (their callers have long had an error;
nothing was acknowledged for them).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Mapping
from contextlib import AsyncExitStack

from grpc import aio
from grpc_health.v1 import health

from common.api_tokens import TokenReader
from common.logs import get_logger
from online.auth import TokenAuthInterceptor
from online.budget import BudgetedInference
from online.claims import ONLINE_PARTITION, ONLINE_TOPIC, ClaimStore
from online.collector import Collector, CollectorStats
from online.metrics import CallMetricsInterceptor, ObservedProcessor, OnlineMetrics
from online.moderator import OnlineModerator
from online.server import (
    ModerationServicer,
    build_server,
    server_credentials,
    set_health,
)
from online.settings import OnlineSettings
from pipelines.rules import RuleEngine, default_ruleset, load_ruleset
from worker.breaker import BreakerState
from worker.http import HealthServer
from worker.inference import InferenceError, TritonModerationClient
from worker.metrics import Metrics
from worker.offsets import OffsetTracker, PartitionKey
from worker.outbox import VerdictOutbox
from worker.processing import BatchProcessor, BatchStore
from worker.publisher import KafkaPublisher
from worker.rescore import Rescorer
from worker.rules_watch import RulesWatcher
from worker.sender_strikes import StrikeCache
from worker.stores.database import Database
from worker.stores.partitions import ensure_verdict_partitions
from worker.stores.pending_texts import PendingTextStore
from worker.stores.strikes import StrikeStore
from worker.stores.verdict_batches import VerdictBatchStore
from worker.stores.verdict_outbox import VerdictOutboxStore

__all__ = ["OnlineService", "serve_until_signalled"]

_log = get_logger(__name__)
_CONSUMER_GROUP = "online"
"""Names the online service in ``VerdictBatchStore`` (it stores no consumer offsets)."""


class _NoCommit:
    """Online verdicts have no Kafka offsets to commit."""

    async def commit(self, points: Mapping[PartitionKey, int | None]) -> None:
        return None


def _online_partitions() -> list[int]:
    return [ONLINE_PARTITION]


class OnlineService:
    """The running service; ``port`` is set once it listens, ``ready`` then."""

    def __init__(
        self, settings: OnlineSettings, *, grace_s: float = 5.0, drain_s: float = 10.0
    ) -> None:
        self._settings = settings
        self._grace_s = grace_s
        self._drain_s = drain_s
        self.metrics = Metrics()
        self.online_metrics = OnlineMetrics(self.metrics.registry)
        self.port: int | None = None
        self.http_port: int | None = None
        """Where ``/metrics``, ``/healthz`` and ``/readyz`` answer, once started."""
        self._store_ok = False
        self._stopping = False
        self.ready = asyncio.Event()
        self.stats: CollectorStats | None = None

    async def run(self, stop: asyncio.Event) -> None:
        s = self._settings
        async with AsyncExitStack() as stack:
            database = Database(s.postgres, light_reset=True)  # no session state is changed
            await database.start()
            stack.push_async_callback(database.stop)
            await ensure_verdict_partitions(database)
            publisher = KafkaPublisher(s.kafka)
            await publisher.start()
            stack.push_async_callback(publisher.stop)
            model = TritonModerationClient(s.triton, metrics=self.metrics.replicas)
            await model.start(wait_ready=False)
            stack.push_async_callback(model.stop)
            outbox_store = VerdictOutboxStore(database)
            give_up = asyncio.Event()

            om = self.online_metrics

            def make_processor(store: BatchStore) -> ObservedProcessor:
                processor = BatchProcessor(
                    inference=BudgetedInference(model, om.budget_missed("inference")),
                    store=store,
                    outbox=outbox_store,
                    publisher=publisher,
                    committer=_NoCommit(),
                    tracker=OffsetTracker(),  # never started: no offsets are stored
                    thresholds=s.policy,
                    verdict_topic=s.kafka.verdict_topic,
                    metrics=self.metrics,
                    give_up=give_up,
                )
                return ObservedProcessor(processor, om)

            o = s.online
            collector = Collector(
                store=VerdictBatchStore(database, _CONSUMER_GROUP),
                make_processor=make_processor,
                max_items=o.max_items,
                max_wait_s=o.max_wait_ms / 1000.0,
                max_in_flight=o.max_in_flight,
                queue_items=o.queue_limit + 1,
                min_model_s=o.min_model_ms / 1000.0,
                model_usable=lambda: model.breaker.state is not BreakerState.OPEN,
                on_budget_spent=om.budget_missed("queued"),
            )
            self.stats = collector.stats
            claims = ClaimStore(database)
            rules_path = s.rules.path
            moderator = OnlineModerator(
                collector=collector,
                claims=claims,
                engine=RuleEngine(load_ruleset(rules_path) if rules_path else default_ruleset()),
                strikes=StrikeCache(StrikeStore(database), ttl_s=s.rules.strikes_ttl_s),
                settings=o,
            )
            servicer = ModerationServicer(moderator, o, max_message_bytes=s.kafka.max_message_bytes)
            health_servicer = health.aio.HealthServicer()
            await set_health(health_servicer, False)

            def token_reader() -> TokenReader:
                return database.pool()

            interceptors: list[aio.ServerInterceptor] = [CallMetricsInterceptor(om)]
            if o.require_token:
                interceptors.append(TokenAuthInterceptor(token_reader, cache_s=o.token_cache_s))
            server = build_server(servicer, health_servicer, interceptors)
            address = f"{o.host}:{o.port}"
            credentials = server_credentials(o)
            if credentials is None:
                self.port = server.add_insecure_port(address)
            else:
                self.port = server.add_secure_port(address, credentials)
            rescorer = Rescorer(
                inference=model,
                store=PendingTextStore(database),
                outbox=outbox_store,
                publisher=publisher,
                thresholds=s.policy,
                verdict_topic=s.kafka.verdict_topic,
                batch_items=s.reliability.rescore_batch_items,
                on_rescored=self.metrics.rescored_total.inc,
            )
            relay = VerdictOutbox(
                outbox_store,
                publisher,
                s.kafka.verdict_topic,
                min_age_s=s.reliability.outbox_min_age_s,
                batch_items=s.reliability.outbox_batch_items,
                on_relayed=self.metrics.outbox_relayed_total.inc,
                on_backlog=self.metrics.outbox_backlog_records.set,
            )
            done = asyncio.Event()
            rel = s.reliability
            http = HealthServer(s.http.host, s.http.port, self.metrics, self.readiness)
            await http.start()
            stack.push_async_callback(http.stop)
            self.http_port = http.port
            await server.start()
            _log.info("online_started", port=self.port, tls=o.tls, token=o.require_token)
            try:
                async with asyncio.TaskGroup() as tasks:
                    collecting = tasks.create_task(collector.run())
                    tasks.create_task(self._watch_health(model, claims, health_servicer, done))
                    tasks.create_task(
                        rescorer.run(
                            done,
                            rel.rescore_interval_s,
                            model.probe,
                            ONLINE_TOPIC,
                            _online_partitions,
                        )
                    )
                    tasks.create_task(
                        relay.run(done, rel.outbox_interval_s, ONLINE_TOPIC, _online_partitions)
                    )
                    if rules_path is not None and s.rules.reload_interval_s > 0:
                        watcher = RulesWatcher(
                            rules_path, s.rules.reload_interval_s, moderator.install_rules
                        )
                        tasks.create_task(watcher.run(done))
                    self.ready.set()
                    await stop.wait()
                    self._stopping = True
                    _log.info("online_stopping", admitted=moderator.admitted)
                    await health_servicer.enter_graceful_shutdown()
                    await server.stop(self._grace_s)
                    await collector.close()
                    try:
                        await asyncio.wait_for(asyncio.shield(collecting), self._drain_s)
                    except TimeoutError:
                        _log.warning("online_drain_deadline_passed")
                        give_up.set()  # writes blocked on PostgreSQL give up; nothing is lost
                    done.set()
            finally:
                await server.stop(None)
            _log.info("online_stopped")

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

    async def _watch_health(
        self,
        model: TritonModerationClient,
        claims: ClaimStore,
        health_servicer: health.aio.HealthServicer,
        done: asyncio.Event,
    ) -> None:
        """SERVING while the model and PostgreSQL answer; drives the breaker's half-open probe."""
        interval = self._settings.online.health_interval_s
        while not done.is_set():
            if model.breaker.state is BreakerState.HALF_OPEN:
                await model.probe()
            try:
                await model.wait_ready(0.0)
                model_ok = True
            except InferenceError:
                model_ok = False
            store_ok = self._store_ok = await claims.ping()
            if not done.is_set():
                await set_health(health_servicer, model_ok and store_ok)
            self.metrics.breaker_open.set(int(model.breaker.state is not BreakerState.CLOSED))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), interval)


async def serve_until_signalled(settings: OnlineSettings) -> None:
    """Run the service until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await OnlineService(settings).run(stop)
