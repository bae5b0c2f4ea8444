"""``POST /v1alpha1/comments:analyze`` over HTTP/1.1: a small ASGI app served by uvicorn.

The app reads the key from ``?key=`` (what Perspective's clients send) or the
``x-goog-api-key`` header, refuses a body over ``max_body_bytes`` with 413 before reading it
whole, hands the rest to the :class:`~online.perspective.analyze.Analyzer` and answers JSON:
the scores, or Google's error shape. uvicorn runs inside the online service's event loop
(``PerspectiveServer``) without its own signal handling: the service's SIGTERM handling stops
it. Nothing about a request's body is logged; a failure logs its type only.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import orjson
import uvicorn

from common.logs import get_logger
from online.perspective.errors import PerspectiveError

__all__ = ["ANALYZE_PATH", "AnalyzeApp", "PerspectiveServer"]

_log = get_logger(__name__)
ANALYZE_PATH = "/v1alpha1/comments:analyze"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Analyze = Callable[[str | None, bytes], Awaitable[dict[str, object]]]
Record = Callable[[str, float], None]
"""Hears of each finished call: its status (``OK`` or the error's, as gRPC names them) and its
seconds."""


def _key(scope: Scope) -> str | None:
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    keys = query.get("key")
    if keys:
        return str(keys[0])
    for name, value in scope.get("headers", ()):
        if name == b"x-goog-api-key":
            return bytes(value).decode("latin-1")
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class AnalyzeApp:
    """The ASGI application: one route, JSON in and out."""

    def __init__(
        self, analyze: Analyze, *, max_body_bytes: int, record: Record | None = None
    ) -> None:
        self._analyze = analyze
        self._max_body_bytes = max_body_bytes
        self._record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        status, body, code = await self._answer(scope, receive)
        if self._record is not None:
            self._record(code, time.perf_counter() - started)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json; charset=UTF-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, bytes, str]:
        try:
            if scope.get("path") != ANALYZE_PATH:
                raise PerspectiveError(404, "NOT_FOUND", f"No such method; POST {ANALYZE_PATH}.")
            if scope.get("method") != "POST":
                raise PerspectiveError(405, "INVALID_ARGUMENT", f"POST {ANALYZE_PATH} only.")
            body = await self._body(scope, receive)
            return 200, orjson.dumps(await self._analyze(_key(scope), body)), "OK"
        except PerspectiveError as exc:
            return exc.http_status, orjson.dumps(exc.body()), exc.canonical
        except Exception as exc:
            _log.error("perspective_failed", error_type=type(exc).__name__)
            error = PerspectiveError(500, "INTERNAL", "Internal error.")
            return 500, orjson.dumps(error.body()), error.canonical

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self._max_body_bytes
        too_large = PerspectiveError(
            413,
            "INVALID_ARGUMENT",
            f"Request payload is larger than {limit} bytes.",
            "COMMENT_TOO_LONG",
        )
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise PerspectiveError(400, "CANCELLED", "The client went away.")
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class _Server(uvicorn.Server):
    """uvicorn without signal handlers of its own (the online service owns SIGTERM)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class PerspectiveServer:
    """uvicorn serving an :class:`AnalyzeApp` on ``host:port`` (0: a free port) in this loop."""

    def __init__(self, app: AnalyzeApp, host: str, port: int, *, grace_s: float = 5.0) -> None:
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_config=None,
            access_log=False,
            http="h11",
            ws="none",
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=max(1, math.ceil(grace_s)),
        )
        self._server = _Server(config)
        self._host = host
        self._port = port
        self._socket: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            return self._port
        return int(self._socket.getsockname()[1])

    async def start(self) -> None:
        """Listen and serve until :meth:`stop`."""
        if self._task is not None:
            return
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        # IPPROTO_TCP named, so asyncio's transports set TCP_NODELAY on the accepted sockets
        # (with proto 0 they do not, and an answer's two writes wait on a delayed ACK: 40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._socket = sock
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it could not start
                raise RuntimeError("the perspective endpoint stopped while starting")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop taking connections; running requests get ``grace_s`` to finish (rounded up to
        whole seconds, at least 1)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._server.should_exit = True
        await task
        if self._socket is not None:
            self._socket.close()
