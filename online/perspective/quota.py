"""Per-key quotas: a token bucket for each API key, refilled at ``qps``, holding ``burst``.

A call takes one token; with none left it is refused with Perspective's 429
``RESOURCE_EXHAUSTED`` before any work is done. Buckets live in this process (one online
instance: the configured rate is per instance). Keys are held as SHA-256 digests, never as sent.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from online.perspective.errors import PerspectiveError

__all__ = ["KeyQuota"]

_MAX_KEYS = 10_000


class KeyQuota:
    def __init__(
        self, *, qps: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be positive and burst at least 1")
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._buckets: dict[bytes, tuple[float, float]] = {}
        """Key digest -> (tokens left, when they were counted)."""

    def take(self, key: str) -> None:
        """Spend one of ``key``'s tokens, or raise 429 ``RESOURCE_EXHAUSTED``."""
        digest = hashlib.sha256(key.encode()).digest()
        now = self._clock()
        tokens, then = self._buckets.get(digest, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) * self._qps)
        if tokens < 1.0:
            self._buckets[digest] = (tokens, now)
            raise PerspectiveError(
                429,
                "RESOURCE_EXHAUSTED",
                f"Quota exceeded for this API key: {self._qps:g} queries per second.",
            )
        if digest not in self._buckets and len(self._buckets) >= _MAX_KEYS:
            self._buckets.clear()  # a simple bound: a forgotten key starts with a full bucket
        self._buckets[digest] = (tokens - 1.0, now)
