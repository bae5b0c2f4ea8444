"""online.app: what start-up built is taken out of the garbage collector's generations; the
health loop lets half-open Triton replicas come back while others serve."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace
from typing import Any

from grpc_health.v1 import health

from engine.breaker import BreakerState
from engine.metrics import Metrics
from online.app import OnlineService, freeze_startup_objects
from online.settings import OnlineSettings


def test_start_up_objects_are_frozen_out_of_the_collectors_walk() -> None:
    """An object that exists when the service freezes is no longer tracked by the collector's
    generations (gc.get_objects), and the frozen count grows; one made after is tracked."""
    before = [object()]
    try:
        freeze_startup_objects()
        after = [object()]
        assert gc.get_freeze_count() > 0
        tracked = {id(o) for o in gc.get_objects()}
        assert id(before) not in tracked
        assert id(after) in tracked
    finally:
        gc.unfreeze()


class _ServingPool:
    """A model whose pool is closed (some replica serves); counts the probes it is given."""

    state = BreakerState.CLOSED

    def __init__(self) -> None:
        self.probes = 0

    async def probe(self) -> bool:
        self.probes += 1
        return True

    async def wait_ready(self, timeout_s: float) -> None:
        return None


class _Claims:
    async def ping(self) -> bool:
        return True


async def test_the_health_loop_probes_every_interval_while_the_pool_serves() -> None:
    """The pool being closed (one replica serving) does not stop the probes: a replica whose
    own breaker is half-open is asked about each interval and can come back, and a DNS pool
    gets its lookups (the probe decides what to ask; with nothing half-open it calls nothing)."""
    model = _ServingPool()
    parts: Any = SimpleNamespace(
        moderation=SimpleNamespace(inference=model, metrics=Metrics()),
        metrics=None,
        claims=_Claims(),
        collector=SimpleNamespace(stats=None),
    )
    service = OnlineService(OnlineSettings(online={"health_interval_s": 0.01}), parts)
    done = asyncio.Event()
    loop = asyncio.create_task(service._watch_health(health.aio.HealthServicer(), done))
    async with asyncio.timeout(5.0):
        while model.probes < 3:  # noqa: ASYNC110 (the fake counts; nothing signals)
            await asyncio.sleep(0.01)
    done.set()
    await loop
    assert model.probes >= 3
