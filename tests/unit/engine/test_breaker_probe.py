"""Tests for the half-open probe (``TritonModerationClient.probe``): the model-ready endpoint
decides whether the circuit closes, and no inference call is spent on probing."""

from __future__ import annotations

from typing import Any

from engine.breaker import BreakerState, CircuitBreaker
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ReadyOnlyTriton:
    """Answers the readiness calls only; any inference call is a test failure."""

    def __init__(self, *, ready: bool) -> None:
        self.ready = ready
        self.ready_calls = 0

    async def is_server_ready(self, **_: Any) -> bool:
        self.ready_calls += 1
        return self.ready

    async def is_model_ready(self, *_: Any, **__: Any) -> bool:
        return self.ready

    async def infer(self, *_: Any, **__: Any) -> None:
        raise AssertionError("probing must not send an inference request")


async def _opened(
    fake: ReadyOnlyTriton,
) -> tuple[TritonModerationClient, CircuitBreaker, FakeClock]:
    clock = FakeClock()
    settings = TritonSettings(breaker_failure_threshold=2, breaker_reset_s=5.0)
    client = TritonModerationClient(settings, client_factory=lambda **_: fake, clock=clock)
    await client.start(wait_ready=False)
    (replica,) = client.breaker.replicas
    replica.breaker.record_failure()
    replica.breaker.record_failure()
    return client, replica.breaker, clock


def _state(breaker: CircuitBreaker) -> BreakerState:
    return breaker.state


async def test_open_circuit_is_not_probed_before_the_reset_time() -> None:
    """While open (before ``breaker_reset_s``), probe answers False without asking the server."""
    fake = ReadyOnlyTriton(ready=True)
    client, breaker, _ = await _opened(fake)
    assert not await client.probe()
    assert fake.ready_calls == 0
    assert _state(breaker) is BreakerState.OPEN


async def test_half_open_probe_closes_when_the_model_is_ready() -> None:
    """After the reset time one readiness probe runs; a ready model closes the circuit."""
    fake = ReadyOnlyTriton(ready=True)
    client, breaker, clock = await _opened(fake)
    clock.now += 5.0
    assert _state(breaker) is BreakerState.HALF_OPEN
    assert await client.probe()
    assert fake.ready_calls == 1
    assert _state(breaker) is BreakerState.CLOSED


async def test_half_open_probe_reopens_when_not_ready() -> None:
    """A model that is not ready re-opens the circuit for another reset period."""
    fake = ReadyOnlyTriton(ready=False)
    client, breaker, clock = await _opened(fake)
    clock.now += 5.0
    assert not await client.probe()
    assert _state(breaker) is BreakerState.OPEN
    clock.now += 4.9
    assert _state(breaker) is BreakerState.OPEN


async def test_closed_circuit_needs_no_probe() -> None:
    """With the circuit closed probe is True and makes no call."""
    fake = ReadyOnlyTriton(ready=False)
    client = TritonModerationClient(TritonSettings(), client_factory=lambda **_: fake)
    await client.start(wait_ready=False)
    assert await client.probe()
    assert fake.ready_calls == 0
