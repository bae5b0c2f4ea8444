"""A circuit breaker for the inference server.

closed → (``failure_threshold`` consecutive failures) → open → (after ``reset_s``) → half-open:
one probe is allowed; success closes the circuit, failure opens it again. A probe that ends with
neither (cancelled, an unexpected error) must :meth:`~CircuitBreaker.abandon` its slot, or the
circuit would stay half-open with the slot taken for good.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

__all__ = ["BreakerState", "CircuitBreaker"]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        failure_threshold: int,
        reset_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = failure_threshold
        self._reset_s = reset_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at >= self._reset_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def allow(self) -> bool:
        """May a call go out now? In half-open only one probe at a time."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return True
        return False

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def abandon(self) -> None:
        """A call let through by :meth:`allow` ended without an answer either way: free the
        half-open probe slot and record nothing."""
        self._probing = False

    def trip(self) -> None:
        """Open the circuit now (a server known not to be ready), whatever the failure count."""
        self._probing = False
        self._failures = max(self._failures, self._threshold)
        self._opened_at = self._clock()

    def record_failure(self) -> None:
        self._probing = False
        self._failures += 1
        if self._opened_at is not None or self._failures >= self._threshold:
            self._opened_at = self._clock()
