"""Retries that cannot multiply an outage: jittered exponential backoff and a retry budget."""

from __future__ import annotations

import random
import time
from collections import deque

__all__ = ["RetryBudget", "backoff_s"]


def backoff_s(attempt: int, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Full-jitter backoff before retry number ``attempt`` (1 = first retry)."""
    cap = min(max_s, base_s * (2 ** (attempt - 1)))
    return (rng or random).uniform(0.0, cap)


class RetryBudget:
    """Allows retries as a fraction of the calls made in a sliding window.

    With ratio 0.2, at most one retry per five calls (plus ``min_retries`` for quiet periods):
    when a server is down every call fails, and retries stop adding load.
    """

    def __init__(self, ratio: float, window_s: float = 10.0, min_retries: int = 3) -> None:
        self._ratio = ratio
        self._window_s = window_s
        self._min_retries = min_retries
        self._calls: deque[float] = deque()
        self._retries: deque[float] = deque()

    def _trim(self, now: float) -> None:
        for q in (self._calls, self._retries):
            while q and now - q[0] > self._window_s:
                q.popleft()

    def record_call(self) -> None:
        now = time.monotonic()
        self._trim(now)
        self._calls.append(now)

    def try_spend(self) -> bool:
        """Take one retry from the budget; ``False`` means give up now."""
        now = time.monotonic()
        self._trim(now)
        allowed = self._min_retries + self._ratio * len(self._calls)
        if len(self._retries) >= allowed:
            return False
        self._retries.append(now)
        return True
