"""A pool of Triton replicas: one long-lived channel and one circuit breaker per replica.

Selection (:meth:`ReplicaPool.pick`) is round-robin over the replicas whose breaker is closed,
skipping those the current call has already tried (so a retry lands on another replica while
there is one). When no such replica is closed, a half-open replica takes the call as its one
probe. With every breaker open there is nothing to pick: the pool is unavailable and callers
fall back (the worker's ``pending_model`` verdicts).

Replicas come back on their own: :meth:`ReplicaPool.probe`, called periodically by the service
(the worker's breaker watcher, once a second), asks each half-open replica's model-ready
endpoint; ready closes its circuit, not ready opens it for another ``breaker_reset_s``. Probing
a pool with no half-open replica makes no call.

The pool's :attr:`ReplicaPool.state` sums the replicas up: closed while any replica is closed,
half-open while none is closed and some is half-open, open only when every breaker is open (or
the pool has no replica yet).

Membership may change while calls run (:meth:`ReplicaPool.replace`, when the replicas come
from a DNS name, ``engine.replica_dns``): a new address gets its own channel and a closed
breaker; a removed one is never picked again and its channel is closed once the calls it still
carries have ended (:meth:`ReplicaPool.close_drained`), so a replica leaves without failing a
call. The metrics of a removed replica are dropped with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from enum import StrEnum
from typing import Any

from common.logs import get_logger
from engine.breaker import BreakerState, CircuitBreaker
from engine.metrics import ReplicaMetrics

__all__ = ["CallOutcome", "Replica", "ReplicaPool"]

_READY_TIMEOUT_S = 2.0
_log = get_logger(__name__)


class CallOutcome(StrEnum):
    """How one inference call to a replica ended, as far as its breaker is concerned."""

    ANSWERED = "answered"
    """Scores came back."""
    REJECTED = "rejected"
    """The server answered with a refusal (bad request, contract): it is up."""
    UNAVAILABLE = "unavailable"
    """Down, overloaded or past the deadline: counts against the breaker."""


class Replica:
    """One Triton server: its address, its gRPC client (``None`` until opened) and its breaker."""

    def __init__(self, url: str, breaker: CircuitBreaker, metrics: ReplicaMetrics | None) -> None:
        self.url = url
        self.breaker = breaker
        self.client: Any = None
        self.in_flight = 0
        """Calls sent on this replica's channel and not yet ended."""
        self._metrics = metrics

    def __repr__(self) -> str:
        return f"Replica({self.url!r}, {self.breaker.state})"

    async def is_ready(self, model_name: str, model_version: str) -> bool:
        """Server and model both ready; any transport failure means not ready."""
        if self.client is None:
            return False
        try:
            server = await self.client.is_server_ready(client_timeout=_READY_TIMEOUT_S)
            model = await self.client.is_model_ready(
                model_name, model_version, client_timeout=_READY_TIMEOUT_S
            )
        except Exception:  # any transport failure means "not ready"
            return False
        return bool(server and model)

    def record(self, outcome: CallOutcome, seconds: float, detail: str = "") -> None:
        """Feed one finished call to the breaker and the metrics (``detail`` is logged only)."""
        was_closed = self.breaker.state is BreakerState.CLOSED
        if outcome is CallOutcome.UNAVAILABLE:
            self.breaker.record_failure()
            if was_closed and self.breaker.state is not BreakerState.CLOSED:
                _log.warning("replica_breaker_open", replica=self.url, error=detail)
        else:
            self.breaker.record_success()
            if not was_closed:
                _log.info("replica_breaker_closed", replica=self.url, by="call")
        if self._metrics is not None:
            self._metrics.calls_total.labels(self.url).inc()
            self._metrics.call_seconds.labels(self.url).observe(seconds)
            if outcome is not CallOutcome.ANSWERED:
                self._metrics.failures_total.labels(self.url, outcome.value).inc()
        self.publish_state()

    def publish_state(self) -> None:
        """Set the breaker-state gauge (state changes with time alone: open → half-open)."""
        if self._metrics is None:
            return
        current = self.breaker.state
        for state in BreakerState:
            self._metrics.breaker_state.labels(self.url, state.value).set(int(state is current))

    async def probe(self, model_name: str, model_version: str) -> None:
        """If half-open (and no probe or call already holds the slot), ask the model-ready
        endpoint: ready closes the circuit, not ready opens it again."""
        if self.breaker.state is not BreakerState.HALF_OPEN or not self.breaker.allow():
            return
        try:
            ready = await self.is_ready(model_name, model_version)
        except BaseException:
            self.breaker.abandon()
            raise
        if ready:
            self.breaker.record_success()
            _log.info("replica_breaker_closed", replica=self.url, by="probe")
        else:
            self.breaker.record_failure()

    def forget_metrics(self) -> None:
        """Drop this replica's series (it left the pool)."""
        m = self._metrics
        if m is None:
            return
        m.calls_total.remove(self.url)
        m.call_seconds.remove(self.url)
        for outcome in (CallOutcome.REJECTED, CallOutcome.UNAVAILABLE):
            m.failures_total.remove(self.url, outcome.value)
        for state in BreakerState:
            m.breaker_state.remove(self.url, state.value)


class ReplicaPool:
    """The replicas of one model service, chosen round-robin among the healthy ones."""

    def __init__(
        self,
        urls: Sequence[str],
        breaker_factory: Callable[[], CircuitBreaker],
        metrics: ReplicaMetrics | None = None,
    ) -> None:
        if len(set(urls)) != len(urls):
            raise ValueError(f"a replica is listed twice: {list(urls)}")
        self._breaker_factory = breaker_factory
        self._metrics = metrics
        self.replicas: tuple[Replica, ...] = tuple(
            Replica(url, breaker_factory(), metrics) for url in urls
        )
        self._leaving: list[Replica] = []
        self._connect: Callable[[str], Any] | None = None
        self._next = 0
        for replica in self.replicas:
            replica.publish_state()
        self._publish_size()

    @property
    def opened(self) -> bool:
        """:meth:`open` was called and :meth:`close` not since."""
        return self._connect is not None

    @property
    def state(self) -> BreakerState:
        states = {replica.breaker.state for replica in self.replicas}
        if BreakerState.CLOSED in states:
            return BreakerState.CLOSED
        if BreakerState.HALF_OPEN in states:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    @property
    def leaving(self) -> tuple[Replica, ...]:
        """Replicas removed from the pool whose channel still carries calls."""
        return tuple(self._leaving)

    def open(self, connect: Callable[[str], Any]) -> None:
        """Create the channel of every replica that has none (channels connect lazily); replicas
        added later get theirs from the same ``connect``."""
        self._connect = connect
        for replica in self.replicas:
            if replica.client is None:
                replica.client = connect(replica.url)

    async def close(self) -> None:
        self._connect = None
        for replica in (*self.replicas, *self._leaving):
            client, replica.client = replica.client, None
            if client is not None:
                await client.close()
        for replica in self._leaving:
            replica.forget_metrics()
        self._leaving.clear()

    def replace(self, urls: Sequence[str]) -> tuple[list[str], list[str]]:
        """Make ``urls`` the pool's replicas: those already in it keep their channel, breaker
        and turn; new ones are added (connected when the pool is open); the others leave
        (never picked again, closed by :meth:`close_drained`). Returns the URLs added and
        removed."""
        wanted = list(dict.fromkeys(urls))
        kept = {replica.url: replica for replica in self.replicas}
        added = [url for url in wanted if url not in kept]
        removed = [replica for replica in self.replicas if replica.url not in wanted]
        if not added and not removed:
            return [], []
        current = self.replicas[self._next] if self.replicas else None
        self._leaving.extend(removed)
        newcomers = [self._returning(url) or self._new_replica(url) for url in added]
        self.replicas = tuple(r for r in self.replicas if r.url in wanted) + tuple(newcomers)
        # The turn stays with the replica that had it, or moves to its successor.
        if current is not None and current in self.replicas:
            self._next = self.replicas.index(current)
        else:
            self._next = 0
        self._publish_size()
        return added, [replica.url for replica in removed]

    def _returning(self, url: str) -> Replica | None:
        """A replica that left and is back before its channel closed: it keeps both."""
        for replica in self._leaving:
            if replica.url == url:
                self._leaving.remove(replica)
                return replica
        return None

    def _new_replica(self, url: str) -> Replica:
        replica = Replica(url, self._breaker_factory(), self._metrics)
        if self._connect is not None:
            replica.client = self._connect(url)
        replica.publish_state()
        return replica

    async def close_drained(self) -> list[str]:
        """Close the channel of every replica that left the pool and carries no call any
        more; the URLs closed."""
        drained = [replica for replica in self._leaving if replica.in_flight == 0]
        for replica in drained:
            self._leaving.remove(replica)
            client, replica.client = replica.client, None
            if client is not None:
                await client.close()
            replica.forget_metrics()
        return [replica.url for replica in drained]

    def _publish_size(self) -> None:
        if self._metrics is not None:
            self._metrics.replicas.set(len(self.replicas))

    def _in_turn(self) -> list[Replica]:
        n = len(self.replicas)
        if n == 0:
            return []
        return [self.replicas[(self._next + k) % n] for k in range(n)]

    def pick(self, avoid: Collection[Replica] = ()) -> Replica | None:
        """The replica for the next call, or ``None`` when every breaker is open (or a probe
        already holds each half-open one). Replicas in ``avoid`` (tried by this call) are taken
        only when no other replica can take the call. A half-open replica returned here holds
        its probe slot: the caller must :meth:`Replica.record` the outcome or abandon it."""
        in_turn = self._in_turn()
        for candidates in ([r for r in in_turn if r not in avoid], in_turn):
            for replica in candidates:
                if replica.breaker.state is BreakerState.CLOSED:
                    self._advance_past(replica)
                    return replica
            for replica in candidates:
                if replica.breaker.state is BreakerState.HALF_OPEN and replica.breaker.allow():
                    self._advance_past(replica)
                    return replica
        return None

    def _advance_past(self, replica: Replica) -> None:
        self._next = (self.replicas.index(replica) + 1) % len(self.replicas)

    async def ready_replicas(self, model_name: str, model_version: str) -> list[Replica]:
        """Ask every replica at once; the ready ones (empty: none is)."""
        answers = await asyncio.gather(
            *(replica.is_ready(model_name, model_version) for replica in self.replicas)
        )
        return [replica for replica, ready in zip(self.replicas, answers, strict=True) if ready]

    async def probe(self, model_name: str, model_version: str) -> bool:
        """Probe every half-open replica (at once) on the model-ready endpoint; whether any
        replica can take calls now (its breaker closed)."""
        await asyncio.gather(
            *(replica.probe(model_name, model_version) for replica in self.replicas)
        )
        for replica in self.replicas:
            replica.publish_state()
        return any(replica.breaker.state is BreakerState.CLOSED for replica in self.replicas)
