"""Two background loops of the worker: the event loop's lag, and the breaker's half-open probe."""

from __future__ import annotations

import asyncio
import contextlib
import time

from engine.breaker import BreakerState
from engine.inference import InferenceClient
from engine.metrics import Metrics

__all__ = ["watch_breaker", "watch_lag"]

_LAG_PROBE_S = 0.5
_BREAKER_PROBE_S = 1.0


async def watch_lag(metrics: Metrics, done: asyncio.Event) -> None:
    """How late the loop wakes up from a sleep (heartbeats share it), and how many tasks run."""
    while not done.is_set():
        before = time.perf_counter()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), _LAG_PROBE_S)
        lag = time.perf_counter() - before - _LAG_PROBE_S
        metrics.event_loop_lag_seconds.set(max(0.0, lag))
        metrics.open_tasks.set(len(asyncio.all_tasks()))


async def watch_breaker(inference: InferenceClient, metrics: Metrics, done: asyncio.Event) -> None:
    """Once a second: half-open replicas ask the model-ready endpoint (close or re-open; no
    call else), and the breaker gauge is set."""
    while not done.is_set():
        await inference.probe()
        metrics.breaker_open.set(int(inference.state is not BreakerState.CLOSED))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), _BREAKER_PROBE_S)
