"""The online service's own Prometheus metrics (prefix ``modstream_online_``), served at
``/metrics`` on its HTTP port (``online.http``) beside the daemon's metrics it shares.

- ``modstream_online_calls_total{method, code}``: finished calls of ``ModerationService`` by
  gRPC status code (``OK``, ``INVALID_ARGUMENT``, ``UNAUTHENTICATED``, ``RESOURCE_EXHAUSTED`` ...),
  counted by :class:`CallMetricsInterceptor`, which sits before the token check so refused
  calls count too;
- ``modstream_online_call_seconds{method}``: their latency, as the server saw it;
- ``modstream_online_batch_size_items{kind}``: messages per collector batch handed to the
  processor (``model``: one Triton request; ``decided``: rule verdicts and rules-only ones);
- ``modstream_online_budget_misses_total{stage}``: messages whose model budget ran out, either
  while ``queued`` (the batch started too late: rules-only at once) or during ``inference``
  (the Triton call outlived it: the batch's messages get ``pending_model``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import grpc
from grpc import aio
from prometheus_client import Counter, Histogram
from prometheus_client.registry import CollectorRegistry

from online.collector import Processor
from worker.batcher import Batch
from worker.work import Work

__all__ = ["CallMetricsInterceptor", "ObservedProcessor", "OnlineMetrics"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

_CALL_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Finer at the low end: a rule verdict answers in a few milliseconds, a model one in tens."""
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
_OBSERVED_PREFIX = "/modstream.v1.ModerationService/"


class OnlineMetrics:
    """Registered on the registry the service's daemon parts already use."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.calls_total = Counter(
            "modstream_online_calls_total",
            "Finished ModerationService calls, by method and gRPC status code.",
            ["method", "code"],
            registry=registry,
        )
        self.call_seconds = Histogram(
            "modstream_online_call_seconds",
            "Latency of a ModerationService call as the server saw it, by method.",
            ["method"],
            buckets=_CALL_BUCKETS_S,
            registry=registry,
        )
        self.batch_size = Histogram(
            "modstream_online_batch_size_items",
            "Messages per collector batch handed to the processor, by kind (model, decided).",
            ["kind"],
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self.budget_misses_total = Counter(
            "modstream_online_budget_misses_total",
            "Messages whose model budget ran out, by stage (queued, inference).",
            ["stage"],
            registry=registry,
        )

    def budget_missed(self, stage: str) -> Callable[[int], None]:
        """A callback counting ``n`` messages that missed their budget at ``stage``."""
        child = self.budget_misses_total.labels(stage)
        return child.inc


def _status_name(context: aio.ServicerContext[Any, Any], failed: BaseException | None) -> str:
    """The status the call ended with: what an abort set, else OK, CANCELLED or UNKNOWN."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):  # grpc may keep the raw status number
        for status in grpc.StatusCode:
            if status.value[0] == code:
                return status.name
    if failed is None:
        return grpc.StatusCode.OK.name
    if isinstance(failed, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED.name
    return grpc.StatusCode.UNKNOWN.name


class CallMetricsInterceptor(aio.ServerInterceptor):
    """Counts and times every unary ``ModerationService`` call, whatever answered it.

    The observing wrapper of a handler is made once and reused for every call that handler
    serves (the service's handlers are fixed objects, and so are the token check's refusals),
    with the method's metric children bound once: a call costs a dictionary look-up here, not
    a new handler and a label look-up per metric (see BENCHMARKS.md, "Online").
    """

    _MAX_WRAPPED = 256
    """Wrapped handlers kept; past this the cache starts over (only unexpected handlers)."""

    def __init__(self, metrics: OnlineMetrics) -> None:
        self._metrics = metrics
        self._wrapped: dict[int, tuple[grpc.RpcMethodHandler[Any, Any], Any]] = {}
        """``id`` of a handler -> (that handler, kept alive so the id stays its own; wrapper)."""

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_Req, _Resp] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Resp] | None:
        handler = await continuation(handler_call_details)
        path = handler_call_details.method
        if handler is None or handler.unary_unary is None or not path.startswith(_OBSERVED_PREFIX):
            return handler
        known = self._wrapped.get(id(handler))
        if known is not None and known[0] is handler:
            return cast("grpc.RpcMethodHandler[_Req, _Resp]", known[1])
        observed = self._observe(path.removeprefix(_OBSERVED_PREFIX), handler)
        if len(self._wrapped) >= self._MAX_WRAPPED:
            self._wrapped.clear()
        self._wrapped[id(handler)] = (handler, observed)
        return observed

    def _observe(
        self, method: str, handler: grpc.RpcMethodHandler[_Req, _Resp]
    ) -> grpc.RpcMethodHandler[_Req, _Resp]:
        """``handler`` wrapped so that each call is timed and counted by its status code."""
        # Handlers of an aio server are coroutines; the stubs type them for the sync server.
        inner = cast(
            "Callable[[Any, aio.ServicerContext[Any, Any]], Awaitable[Any]]", handler.unary_unary
        )
        seconds = self._metrics.call_seconds.labels(method)
        calls_total = self._metrics.calls_total
        by_code: dict[str, Any] = {}

        async def observed(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            started = time.perf_counter()
            failed: BaseException | None = None
            try:
                return await inner(request, context)
            except BaseException as exc:  # aborts raise; re-raised untouched
                failed = exc
                raise
            finally:
                seconds.observe(time.perf_counter() - started)
                code = _status_name(context, failed)
                counter = by_code.get(code)
                if counter is None:
                    counter = by_code[code] = calls_total.labels(method, code)
                counter.inc()

        return grpc.unary_unary_rpc_method_handler(
            observed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class ObservedProcessor:
    """The collector's processor, observing the size of each batch it is handed."""

    def __init__(self, inner: Processor, metrics: OnlineMetrics) -> None:
        self._inner = inner
        self._model = metrics.batch_size.labels("model")
        self._decided = metrics.batch_size.labels("decided")

    async def process_model_batch(self, batch: Batch[Work]) -> None:
        self._model.observe(len(batch.items))
        await self._inner.process_model_batch(batch)

    async def process_decided_batch(self, batch: Batch[Work]) -> None:
        self._decided.observe(len(batch.items))
        await self._inner.process_decided_batch(batch)
