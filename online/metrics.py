"""The online service's own Prometheus metrics (prefix ``modstream_online_``), served at
``/metrics`` on its HTTP port (``online.http``) beside the daemon's metrics it shares.

- ``modstream_online_calls_total{method, code}``: finished calls of ``ModerationService`` by
  gRPC status code (``OK``, ``INVALID_ARGUMENT``, ``UNAUTHENTICATED``, ``RESOURCE_EXHAUSTED`` ...),
  recorded by :class:`MethodCalls` around the token check (``online.guard``), so refused calls
  count too;
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
from collections.abc import Callable
from typing import Any

import grpc
from grpc import aio
from prometheus_client import Counter, Histogram
from prometheus_client.registry import CollectorRegistry

from engine.batcher import Batch
from engine.work import Work
from online.collector import Processor

__all__ = ["MethodCalls", "ObservedProcessor", "OnlineMetrics"]

_CALL_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Finer at the low end: a rule verdict answers in a few milliseconds, a model one in tens."""
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


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


class MethodCalls:
    """The call metrics of one ``ModerationService`` method, their children bound once: a call
    costs a histogram observation and a counter increment, no label look-up."""

    def __init__(self, metrics: OnlineMetrics, method: str) -> None:
        self._method = method
        self._seconds = metrics.call_seconds.labels(method)
        self._calls_total = metrics.calls_total
        self._by_code: dict[str, Any] = {}

    def record(
        self,
        context: aio.ServicerContext[Any, Any],
        started: float,
        failed: BaseException | None,
    ) -> None:
        """A call that began at ``started`` (``time.perf_counter()``) ended, raising ``failed``."""
        self._seconds.observe(time.perf_counter() - started)
        code = _status_name(context, failed)
        counter = self._by_code.get(code)
        if counter is None:
            counter = self._by_code[code] = self._calls_total.labels(self._method, code)
        counter.inc()


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
