"""Tests for engine.breaker: closed → open → half-open with one probe → closed or open."""

from __future__ import annotations

from engine.breaker import BreakerState, CircuitBreaker


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _state(breaker: CircuitBreaker) -> BreakerState:
    """The breaker's state, read through a call so mypy does not narrow it between asserts."""
    return breaker.state


def _opened(threshold: int = 3, reset_s: float = 10.0) -> tuple[CircuitBreaker, FakeClock]:
    clock = FakeClock()
    breaker = CircuitBreaker(threshold, reset_s, clock=clock)
    for _ in range(threshold):
        breaker.record_failure()
    return breaker, clock


def test_opens_after_threshold_consecutive_failures() -> None:
    """It stays closed below the threshold and opens at it, refusing calls."""
    breaker = CircuitBreaker(3, 10.0, clock=FakeClock())
    breaker.record_failure()
    breaker.record_failure()
    assert _state(breaker) is BreakerState.CLOSED
    assert breaker.allow()
    breaker.record_failure()
    assert _state(breaker) is BreakerState.OPEN
    assert not breaker.allow()


def test_success_resets_the_failure_count() -> None:
    """Failures must be consecutive: a success in between starts the count again."""
    breaker = CircuitBreaker(3, 10.0, clock=FakeClock())
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    breaker.record_failure()
    assert _state(breaker) is BreakerState.CLOSED


def test_half_open_after_reset_allows_exactly_one_probe() -> None:
    """After reset_s the breaker is half-open and lets one probe through, not two."""
    breaker, clock = _opened()
    clock.now += 9.9
    assert _state(breaker) is BreakerState.OPEN
    assert not breaker.allow()
    clock.now += 0.1
    assert _state(breaker) is BreakerState.HALF_OPEN
    assert breaker.allow()
    assert not breaker.allow()
    assert not breaker.allow()


def test_probe_success_closes() -> None:
    """A successful probe closes the circuit: every call is allowed again."""
    breaker, clock = _opened()
    clock.now += 10.0
    assert breaker.allow()
    breaker.record_success()
    assert _state(breaker) is BreakerState.CLOSED
    assert breaker.allow()
    assert breaker.allow()


def test_probe_failure_reopens_for_another_reset_period() -> None:
    """A failed probe opens the circuit again, from the time of that failure."""
    breaker, clock = _opened()
    clock.now += 10.0
    assert breaker.allow()
    breaker.record_failure()
    assert _state(breaker) is BreakerState.OPEN
    assert not breaker.allow()
    clock.now += 9.0
    assert not breaker.allow()
    clock.now += 1.0
    assert _state(breaker) is BreakerState.HALF_OPEN
    assert breaker.allow()
