"""The Triton gRPC client: one long-lived channel, a deadline per call, retries by status code.

Only UNAVAILABLE and DEADLINE_EXCEEDED are retried, with jittered backoff and a retry budget;
INVALID_ARGUMENT and contract violations are never retried. A circuit breaker fails calls fast
while the server is down so the worker can fall back to rules-only verdicts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from common.logs import get_logger
from pipelines.scores import MODEL_INPUT, MODEL_OUTPUTS, ModelScores, ScoreRowError
from worker.breaker import BreakerState, CircuitBreaker
from worker.retry import RetryBudget, backoff_s
from worker.settings import TritonSettings

__all__ = [
    "InferenceError",
    "InferenceRejected",
    "InferenceResult",
    "InferenceUnavailable",
    "TritonModerationClient",
    "client_options",
]

_RETRIABLE_STATUSES = frozenset({"StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED"})
_RECONNECT_BACKOFF_MS = (500, 2_000)
"""gRPC's reconnect backoff (initial, max): the default max of 120 s would keep the worker on
rules-only verdicts for minutes after Triton is back."""
_log = get_logger(__name__)


class InferenceError(Exception):
    retriable: ClassVar[bool] = False


class InferenceUnavailable(InferenceError):
    """The server cannot answer now (down, overloaded, deadline, circuit open)."""

    retriable = True


class InferenceRejected(InferenceError):
    """The server refused the request or broke the model contract; retrying will not help."""

    retriable = False


@dataclass(frozen=True, slots=True)
class InferenceResult:
    scores: list[ModelScores]
    model_name: str
    model_version: str
    latency_ms: float


def _rows(array: Any, n: int, task: str) -> list[tuple[float, ...]]:
    matrix = np.asarray(array, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise InferenceRejected(f"{task}: expected {n} rows, got shape {matrix.shape}")
    return [tuple(row) for row in matrix.tolist()]


def client_options(settings: TritonSettings) -> dict[str, Any]:
    """Keyword arguments for tritonclient's ``InferenceServerClient``: the URL, channel limits
    and, with ``ssl``, the PEM file paths (tritonclient reads the files itself)."""
    from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE  # heavy, kept off the CLI path

    options: dict[str, Any] = {
        "url": settings.grpc_url,
        "channel_args": [
            ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
            ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
            ("grpc.initial_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS[0]),
            ("grpc.min_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS[0]),
            ("grpc.max_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS[1]),
        ],
    }
    if settings.ssl:
        options["ssl"] = True
        for name in ("root_certificates", "private_key", "certificate_chain"):
            path = getattr(settings, name)
            options[name] = None if path is None else str(path)
    return options


def _grpc_client(**options: Any) -> Any:
    from tritonclient.grpc import aio as grpc_aio  # heavy, kept off the CLI path

    return grpc_aio.InferenceServerClient(**options)


class TritonModerationClient:
    """Scores texts with the ``moderation`` model (see ``pipelines.scores``).

    ``client_factory`` builds the gRPC client from :func:`client_options` (tests pass a fake).
    """

    def __init__(
        self,
        settings: TritonSettings,
        breaker: CircuitBreaker | None = None,
        client_factory: Callable[..., Any] = _grpc_client,
    ) -> None:
        self._settings = settings
        self._client_factory = client_factory
        self._breaker = breaker or CircuitBreaker(
            settings.breaker_failure_threshold, settings.breaker_reset_s
        )
        self._budget = RetryBudget(settings.retry_budget_ratio)
        self._client: Any = None

    @property
    def breaker(self) -> CircuitBreaker:
        return self._breaker

    async def start(self, *, wait_ready: bool = True) -> None:
        """Open the channel and (by default) wait until the server and the model are ready."""
        if self._client is None:
            self._client = self._client_factory(**client_options(self._settings))
        if wait_ready:
            await self.wait_ready(self._settings.ready_timeout_s)

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> TritonModerationClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def is_ready(self) -> bool:
        """Server and model both ready (the half-open probe uses this)."""
        if self._client is None:
            return False
        try:
            server = await self._client.is_server_ready(client_timeout=2.0)
            model = await self._client.is_model_ready(
                self._settings.model_name, self._settings.model_version, client_timeout=2.0
            )
        except Exception:  # any transport failure means "not ready"
            return False
        return bool(server and model)

    async def probe(self) -> bool:
        """Half-open probe on the model-ready endpoint: ready closes the circuit, not ready
        opens it again. Returns whether calls may go out now (no call is made while closed)."""
        state = self._breaker.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.OPEN or not self._breaker.allow():
            return False
        if await self.is_ready():
            self._breaker.record_success()
            _log.info("breaker_closed", url=self._settings.grpc_url)
            return True
        self._breaker.record_failure()
        return False

    async def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not await self.is_ready():
            if time.monotonic() >= deadline:
                raise InferenceUnavailable(
                    f"model {self._settings.model_name!r} not ready at "
                    f"{self._settings.grpc_url} after {timeout_s:.0f}s"
                )
            await asyncio.sleep(0.5)
        _log.info("triton_ready", url=self._settings.grpc_url, model=self._settings.model_name)

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        """Score ``texts`` (one row each), retrying transient failures within the budget."""
        if not texts:
            return InferenceResult([], self._settings.model_name, self._settings.model_version, 0.0)
        if self._client is None:
            raise InferenceUnavailable("client not started")
        attempt = 0
        while True:
            attempt += 1
            if not self._breaker.allow():
                raise InferenceUnavailable("circuit breaker open")
            self._budget.record_call()
            started = time.perf_counter()
            try:
                result = await self._call(texts)
            except InferenceUnavailable:
                self._breaker.record_failure()
                if attempt >= self._settings.max_attempts or not self._budget.try_spend():
                    raise
                await asyncio.sleep(
                    backoff_s(attempt, self._settings.backoff_base_s, self._settings.backoff_max_s)
                )
                continue
            except InferenceRejected:
                # The server answered: it is up, the request is bad. Do not trip the breaker.
                self._breaker.record_success()
                raise
            self._breaker.record_success()
            latency_ms = (time.perf_counter() - started) * 1000.0
            return InferenceResult(result[0], self._settings.model_name, result[1], latency_ms)

    async def _call(self, texts: Sequence[str]) -> tuple[list[ModelScores], str]:
        from tritonclient.grpc import InferInput, InferRequestedOutput
        from tritonclient.utils import InferenceServerException

        data = np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)
        tensor = InferInput(MODEL_INPUT, list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        outputs = [InferRequestedOutput(name) for name in MODEL_OUTPUTS]
        try:
            response = await self._client.infer(
                self._settings.model_name,
                [tensor],
                model_version=self._settings.model_version,
                outputs=outputs,
                client_timeout=self._settings.request_timeout_s,
            )
        except InferenceServerException as exc:
            status = str(exc.status())
            if status in _RETRIABLE_STATUSES:
                raise InferenceUnavailable(f"triton {status}") from exc
            raise InferenceRejected(f"triton {status}: {exc.message()}") from exc
        except (TimeoutError, OSError) as exc:
            raise InferenceUnavailable(f"transport: {type(exc).__name__}") from exc
        n = len(texts)
        sentiment = _rows(response.as_numpy("SENTIMENT"), n, "SENTIMENT")
        intent = _rows(response.as_numpy("INTENT"), n, "INTENT")
        toxicity = _rows(response.as_numpy("TOXICITY"), n, "TOXICITY")
        try:
            scores = [
                ModelScores(s, i, t) for s, i, t in zip(sentiment, intent, toxicity, strict=True)
            ]
        except ScoreRowError as exc:
            raise InferenceRejected(f"contract violation: {exc}") from exc
        version = str(response.get_response().model_version)
        return scores, version
