"""The Triton gRPC client: the model call and its contract, a deadline per call, retries by status.

The client talks to a pool of replicas (``engine.replicas``; one replica with a single
``triton.grpc_url``): one long-lived channel and one circuit breaker each, round-robin over the
healthy ones. With ``triton.grpc_dns`` the replicas are the addresses a name resolves to (a
Kubernetes headless Service, ``engine.replica_dns``), looked up again every
``triton.dns_refresh_s`` from :meth:`TritonModerationClient.probe` (which every service calls
periodically) and while waiting for readiness: new pods get calls within that interval, and a
pod that left is drained (its channel closes once its calls have ended).

Only UNAVAILABLE and DEADLINE_EXCEEDED are retried, on another replica while there
is one, with jittered backoff, within the call's deadline (``request_timeout_s``) and a retry
budget shared by the pool (NOT_FOUND too: the model is not loaded on that replica);
INVALID_ARGUMENT and contract violations are never retried. Only when
every replica's breaker is open do calls fail fast (``InferenceUnavailable``), so the worker can
fall back to rules-only verdicts. It is the ``triton`` backend of ``engine.inference``'s
``InferenceClient``; ``engine.parts`` builds it.

Outputs: the three every model has (``pipelines.scores.MODEL_OUTPUTS``), and ``HARMS`` when the
served model declares it. Before its first call to a replica the client reads the model's
metadata there (``ModelMetadata``: the outputs of its config) and keeps the answer until a call
to that replica fails as unavailable (the server may come back with another model). A model
that does not declare ``HARMS``, or a response that lacks it, gives scores without harms.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from common.logs import get_logger
from engine.breaker import BreakerState, CircuitBreaker
from engine.inference import (
    InferenceError,
    InferenceRejected,
    InferenceResult,
    InferenceUnavailable,
    scores_from_outputs,
)
from engine.metrics import ReplicaMetrics
from engine.replica_dns import (
    ReplicaDns,
    ReplicaLookupFailed,
    Resolver,
    split_host_port,
    system_resolver,
)
from engine.replicas import CallOutcome, Replica, ReplicaPool
from engine.retry import RetryBudget, backoff_s
from engine.settings import TritonSettings
from pipelines.scores import HARMS_OUTPUT, MODEL_INPUT, MODEL_OUTPUTS, ModelScores

__all__ = ["TritonModerationClient", "client_options"]

_RETRIABLE_STATUSES = frozenset(
    {"StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED", "StatusCode.NOT_FOUND"}
)
"""NOT_FOUND (no such model or version) is the replica's state, not the request's: a server
shutting down unloads its models before it stops listening, and one starting up has not loaded
them yet. Another replica may have the model; the half-open probe asks model-ready anyway."""
_RECONNECT_BACKOFF_MS = (500, 2_000)
"""gRPC's reconnect backoff (initial, max): the default max of 120 s would keep the worker on
rules-only verdicts for minutes after Triton is back."""
_log = get_logger(__name__)


def client_options(settings: TritonSettings, url: str | None = None) -> dict[str, Any]:
    """Keyword arguments for tritonclient's ``InferenceServerClient``: the URL (``url``, by
    default the first configured replica's), channel limits and, with ``ssl``, the PEM file
    paths (tritonclient reads the files itself). A replica found through ``grpc_dns`` is an
    address: with ``ssl`` its certificate is checked against the DNS name instead."""
    from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE  # heavy, kept off the CLI path

    channel_args: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
        ("grpc.initial_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS[0]),
        ("grpc.min_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS[0]),
        ("grpc.max_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS[1]),
    ]
    options: dict[str, Any] = {
        "url": url or (settings.replica_urls or [settings.grpc_url])[0],
        "channel_args": channel_args,
    }
    if settings.ssl:
        if settings.grpc_dns:
            host, _ = split_host_port(settings.grpc_dns)
            channel_args.append(("grpc.ssl_target_name_override", host))
        options["ssl"] = True
        for name in ("root_certificates", "private_key", "certificate_chain"):
            path = getattr(settings, name)
            options[name] = None if path is None else str(path)
    return options


def _grpc_client(**options: Any) -> Any:
    from tritonclient.grpc import aio as grpc_aio  # heavy, kept off the CLI path

    return grpc_aio.InferenceServerClient(**options)


class TritonModerationClient:
    """Scores texts with the ``moderation`` model (see ``pipelines.scores``) on a pool of
    replicas (``triton.grpc_urls``, or the one ``triton.grpc_url``).

    ``client_factory`` builds one replica's gRPC client from :func:`client_options` (tests pass
    a fake); ``clock`` drives the replicas' breakers and the DNS refresh; ``metrics`` records
    per-replica calls, failures, breaker states and latency; ``resolver`` looks up
    ``triton.grpc_dns`` (the system's by default). Services call :meth:`probe` periodically
    (the worker once a second) so replicas whose breaker opened come back on their own and the
    replicas follow the DNS name.
    """

    def __init__(
        self,
        settings: TritonSettings,
        *,
        client_factory: Callable[..., Any] = _grpc_client,
        clock: Callable[[], float] = time.monotonic,
        metrics: ReplicaMetrics | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._settings = settings
        self._client_factory = client_factory
        self._clock = clock
        self._dns = ReplicaDns(settings.grpc_dns, resolver) if settings.grpc_dns else None
        self._lookup_due = float("-inf")
        self._pool = ReplicaPool(
            settings.replica_urls,
            lambda: CircuitBreaker(
                settings.breaker_failure_threshold, settings.breaker_reset_s, clock=clock
            ),
            metrics,
        )
        self._budget = RetryBudget(settings.retry_budget_ratio)
        self._declares_harms: dict[str, bool] = {}
        """Per replica URL: whether its model declares ``HARMS`` (read once, see the module)."""

    @property
    def state(self) -> BreakerState:
        """Closed while some replica's breaker is closed, open only when every one is."""
        return self._pool.state

    @property
    def breaker(self) -> ReplicaPool:
        """The pool: ``state`` is closed while any replica's breaker is closed, open only when
        every replica's is (``replicas`` holds each replica and its own breaker)."""
        return self._pool

    def _connect(self, url: str) -> Any:
        return self._client_factory(**client_options(self._settings, url))

    @property
    def _where(self) -> str:
        return self._settings.grpc_dns or ", ".join(self._settings.replica_urls)

    async def follow_dns(self, *, now: bool = False) -> None:
        """With ``triton.grpc_dns``: once ``dns_refresh_s`` has passed since the last lookup
        (or ``now``), look the name up and make its addresses the pool's replicas, then close
        the channels of replicas that left and carry no call any more. A failed lookup keeps
        the replicas known (their breakers judge them). Without it, nothing."""
        if self._dns is None:
            return
        if not now and self._clock() < self._lookup_due:
            await self._pool.close_drained()
            return
        self._lookup_due = self._clock() + self._settings.dns_refresh_s
        try:
            urls = await self._dns.urls()
        except ReplicaLookupFailed as exc:
            _log.warning("triton_dns_failed", name=self._dns.target, error=str(exc))
        else:
            added, removed = self._pool.replace(urls)
            if added or removed:
                _log.info(
                    "triton_replicas_changed",
                    name=self._dns.target,
                    added=added,
                    removed=removed,
                    replicas=len(self._pool.replicas),
                )
        await self._pool.close_drained()

    async def start(self, *, wait_ready: bool = True) -> None:
        """Look the replicas up (with ``grpc_dns``), open one channel per replica and (by
        default) wait until a replica and its model are ready."""
        self._pool.open(self._connect)
        await self.follow_dns(now=True)
        if wait_ready:
            await self.wait_ready(self._settings.ready_timeout_s)

    async def stop(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> TritonModerationClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def is_ready(self) -> bool:
        """Some replica's server and model are both ready."""
        s = self._settings
        return bool(await self._pool.ready_replicas(s.model_name, s.model_version))

    async def probe(self) -> bool:
        """Half-open probes on the model-ready endpoint of each replica whose breaker is
        half-open: ready closes that circuit, not ready opens it again. Returns whether calls
        may go out now (some replica's breaker is closed); no call is made for closed or open
        replicas. With ``grpc_dns`` the name is looked up again first when it is due."""
        await self.follow_dns()
        return await self._pool.probe(self._settings.model_name, self._settings.model_version)

    async def wait_ready(self, timeout_s: float) -> None:
        """Wait until some replica is ready; the replicas not ready then have their breaker
        opened, so calls go to the ready ones and probing brings the others in."""
        s = self._settings
        deadline = time.monotonic() + timeout_s
        while True:
            await self.follow_dns(now=not self._pool.replicas)
            if ready := await self._pool.ready_replicas(s.model_name, s.model_version):
                break
            if time.monotonic() >= deadline:
                raise InferenceUnavailable(
                    f"model {s.model_name!r} not ready at any of {self._where} "
                    f"after {timeout_s:.0f}s"
                )
            await asyncio.sleep(0.5)
        for replica in self._pool.replicas:
            if replica not in ready:
                replica.breaker.trip()
                replica.publish_state()
                _log.warning("triton_replica_not_ready", url=replica.url, model=s.model_name)
        _log.info("triton_ready", urls=[r.url for r in ready], model=s.model_name)

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        """Score ``texts`` (one row each), retrying transient failures on another replica while
        there is one, within the deadline and the retry budget."""
        s = self._settings
        if not texts:
            return InferenceResult([], s.model_name, s.model_version, 0.0)
        if not self._pool.opened:
            raise InferenceUnavailable("client not started")
        deadline = time.monotonic() + s.request_timeout_s
        tried: list[Replica] = []
        attempt = 0
        while True:
            attempt += 1
            replica = self._pool.pick(avoid=tried)
            if replica is None:
                if not self._pool.replicas:
                    raise InferenceUnavailable(f"no replica found at {self._where}")
                raise InferenceUnavailable("circuit breaker open on every replica")
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                replica.breaker.abandon()
                raise InferenceUnavailable(f"deadline of {s.request_timeout_s}s exceeded")
            self._budget.record_call()
            started = time.perf_counter()
            replica.in_flight += 1
            try:
                scores, version = await self._call(replica, texts, deadline)
            except InferenceError as exc:
                if not exc.retriable:
                    # The server answered: it is up, the request is bad. Do not trip the breaker.
                    replica.record(CallOutcome.REJECTED, time.perf_counter() - started, str(exc))
                    raise
                self._declares_harms.pop(replica.url, None)  # read again when it answers
                replica.record(CallOutcome.UNAVAILABLE, time.perf_counter() - started, str(exc))
                tried.append(replica)
                if attempt >= s.max_attempts or not self._budget.try_spend():
                    raise
                pause_s = backoff_s(attempt, s.backoff_base_s, s.backoff_max_s)
                await asyncio.sleep(min(pause_s, max(0.0, deadline - time.monotonic())))
                continue
            except BaseException:
                replica.breaker.abandon()  # cancelled or unexpected: free a half-open slot
                raise
            finally:
                replica.in_flight -= 1
            latency_s = time.perf_counter() - started
            replica.record(CallOutcome.ANSWERED, latency_s)
            return InferenceResult(scores, s.model_name, version, latency_s * 1000.0)

    async def _output_names(self, replica: Replica, deadline: float) -> list[str]:
        """The outputs to ask ``replica`` for: the required three, and ``HARMS`` when its model
        declares it (its metadata, read on the first call and kept, see the module)."""
        declares = self._declares_harms.get(replica.url)
        if declares is None:
            s = self._settings
            try:
                metadata = await _translated(
                    replica.client.get_model_metadata(
                        s.model_name,
                        s.model_version,
                        client_timeout=max(0.0, deadline - time.monotonic()),
                    )
                )
            except InferenceRejected as exc:
                # A server that will not describe the model still serves the required outputs.
                _log.warning("triton_model_metadata_refused", replica=replica.url, error=str(exc))
                declares = False
            else:
                declares = any(output.name == HARMS_OUTPUT for output in metadata.outputs)
            self._declares_harms[replica.url] = declares
            _log.info(
                "triton_model_outputs_read", replica=replica.url, model=s.model_name, harms=declares
            )
        return [*MODEL_OUTPUTS, HARMS_OUTPUT] if declares else list(MODEL_OUTPUTS)

    async def _call(
        self, replica: Replica, texts: Sequence[str], deadline: float
    ) -> tuple[list[ModelScores], str]:
        from tritonclient.grpc import InferInput, InferRequestedOutput

        names = await self._output_names(replica, deadline)
        data = np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)
        tensor = InferInput(MODEL_INPUT, list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        response = await _translated(
            replica.client.infer(
                self._settings.model_name,
                [tensor],
                model_version=self._settings.model_version,
                outputs=[InferRequestedOutput(name) for name in names],
                client_timeout=max(0.0, deadline - time.monotonic()),
            )
        )
        scores = scores_from_outputs(response.as_numpy, len(texts))
        version = str(response.get_response().model_version)
        return scores, version


async def _translated(call: Awaitable[Any]) -> Any:
    """``call``'s answer, with tritonclient's and the transport's failures as inference errors:
    the retriable statuses and transport failures ``InferenceUnavailable``, any other status
    ``InferenceRejected``."""
    from tritonclient.utils import InferenceServerException

    try:
        return await call
    except InferenceServerException as exc:
        status = str(exc.status())
        if status in _RETRIABLE_STATUSES:
            raise InferenceUnavailable(f"triton {status}") from exc
        raise InferenceRejected(f"triton {status}: {exc.message()}") from exc
    except (TimeoutError, OSError) as exc:
        raise InferenceUnavailable(f"transport: {type(exc).__name__}") from exc
