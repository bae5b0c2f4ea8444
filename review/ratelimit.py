"""Sign-in attempts per client address: a moving one-minute window (the ``limits`` library).

The console counts every sign-in attempt; the API counts only calls whose token was not valid, and
refuses any token check from an address whose window is full, so guessing stops at the limit. The
window lives in this process's memory: several processes each keep their own. Behind a reverse
proxy every client shares the proxy's address (``review serve`` ignores forwarded headers).
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.requests import Request

from review.errors import SignInRateLimitedError

__all__ = ["SignInLimiter", "client_address"]


def client_address(request: Request) -> str:
    """The peer address the limit is kept for (``unknown`` when the server gives none)."""
    return request.client.host if request.client is not None else "unknown"


class SignInLimiter:
    """At most ``per_minute`` counted attempts per address in any sixty seconds."""

    def __init__(self, per_minute: int) -> None:
        self._item = RateLimitItemPerMinute(per_minute)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    def _refuse(self, address: str) -> SignInRateLimitedError:
        stats = self._limiter.get_window_stats(self._item, address)
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        return SignInRateLimitedError(
            f"too many sign-in attempts from this address; try again in {wait} s", wait
        )

    def check(self, address: str) -> None:
        """Raise :class:`SignInRateLimitedError` if ``address`` has no attempt left."""
        if not self._limiter.test(self._item, address):
            raise self._refuse(address)

    def count(self, address: str) -> None:
        """Spend one attempt; raise :class:`SignInRateLimitedError` if none was left."""
        if not self._limiter.hit(self._item, address):
            raise self._refuse(address)
