"""A request body limit on every route: an ASGI middleware that answers 413 past the limit.

A declared ``Content-Length`` over the limit is refused before the app runs or any byte is read.
Bodies without one (chunked) are counted as they arrive; the read that crosses the limit raises
:class:`BodyTooLargeError`, which the app's handler (or this middleware, if it escapes) turns into
413. It subclasses Starlette's ``HTTPException`` so FastAPI's body parsing passes it through
instead of reporting a parse error.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "BodyLimitMiddleware",
    "BodyTooLargeError",
    "body_too_large_response",
    "handle_body_too_large",
]


class BodyTooLargeError(HTTPException):
    """The request body is (or became, while streaming) larger than the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=f"request bodies are limited to {limit} bytes")
        self.limit = limit


def body_too_large_response(limit: int) -> Response:
    """The 413 answer, in the API's ``{"error", "detail"}`` shape."""
    return JSONResponse(
        {"error": "body_too_large", "detail": f"request bodies are limited to {limit} bytes"},
        status_code=413,
        headers={"Connection": "close"},
    )


async def handle_body_too_large(request: Request, exc: Exception) -> Response:
    """Exception handler for :class:`BodyTooLargeError` raised inside a route."""
    assert isinstance(exc, BodyTooLargeError)
    return body_too_large_response(exc.limit)


def _declared_length(scope: Scope) -> int | None:
    raw = Headers(scope=scope).get("content-length")
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw)


class BodyLimitMiddleware:
    """Refuse HTTP request bodies larger than ``max_body_bytes`` with 413."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await body_too_large_response(limit)(scope, receive, send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLargeError:
            if started:
                raise
            await body_too_large_response(limit)(scope, receive, send)
