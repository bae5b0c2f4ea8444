"""The body-limit middleware and the sign-in limiter, without a database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from review.bodylimit import BodyLimitMiddleware
from review.errors import SignInRateLimitedError
from review.ratelimit import SignInLimiter


class _Echo:
    """An app that reads the whole body and answers its length; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        body = await Request(scope, receive).body()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})


async def _chunks(count: int, size: int, pulled: list[int]) -> AsyncIterator[bytes]:
    for _ in range(count):
        pulled.append(size)
        yield b"x" * size


def _client(app: BodyLimitMiddleware) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_declared_bodies_over_the_limit_never_reach_the_app() -> None:
    """A Content-Length over the limit is answered 413 before the app runs."""
    echo = _Echo()
    async with _client(BodyLimitMiddleware(echo, max_body_bytes=100)) as client:
        response = await client.post("/", content=b"x" * 101)
        assert response.status_code == 413
        assert response.json()["error"] == "body_too_large"
        assert echo.calls == 0
        fits = await client.post("/", content=b"x" * 100)
        assert (fits.status_code, fits.text) == (200, "100")


async def test_chunked_bodies_stop_at_the_limit() -> None:
    """Without Content-Length the body is counted as it arrives and refused once past the limit."""
    echo = _Echo()
    pulled: list[int] = []
    async with _client(BodyLimitMiddleware(echo, max_body_bytes=1000)) as client:
        response = await client.post("/", content=_chunks(100, 300, pulled))
        assert response.status_code == 413
        assert sum(pulled) == 1200
        pulled.clear()
        fits = await client.post("/", content=_chunks(3, 300, pulled))
        assert (fits.status_code, fits.text) == (200, "900")


def test_sign_in_limiter_counts_per_address_and_says_when_to_retry() -> None:
    """The third attempt of an address with two a minute is refused; other addresses are not."""
    limiter = SignInLimiter(per_minute=2)
    limiter.check("a")
    limiter.count("a")
    limiter.count("a")
    with pytest.raises(SignInRateLimitedError) as refused:
        limiter.check("a")
    assert refused.value.retry_after_s is not None
    assert 1 <= refused.value.retry_after_s <= 60
    with pytest.raises(SignInRateLimitedError):
        limiter.count("a")
    limiter.check("b")
    limiter.count("b")
