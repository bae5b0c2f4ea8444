"""A token bucket: at most ``rate`` items a second on average, bursts up to ``burst``.

``modstream rescan`` takes a batch's worth of tokens before it scores the batch, so a rescan
shares the model and PostgreSQL with live traffic at a rate the operator chose (``--rate``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self.rate = rate
        self.burst = burst if burst is not None else rate
        if self.burst <= 0:
            raise ValueError(f"burst must be positive, got {self.burst}")
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._at = clock()
        self.waited_s = 0.0
        """Time spent waiting for tokens so far."""

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    async def take(self, count: float) -> None:
        """Wait until ``count`` tokens are there and take them. A count above ``burst`` is
        allowed: it waits for the whole burst, then goes into debt for the rest, so the
        average rate holds whatever the batch size."""
        if count <= 0:
            return
        self._refill()
        need = min(count, self.burst)
        while self._tokens < need:
            wait = (need - self._tokens) / self.rate
            self.waited_s += wait
            await self._sleep(wait)
            self._refill()
        self._tokens -= count
