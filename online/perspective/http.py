"""``POST /v1alpha1/comments:analyze`` over HTTP/1.1, on asyncio's own transports.

A small keep-alive HTTP/1.1 server (``asyncio.Protocol``): one request at a time per
connection, ``Content-Length`` bodies (a chunked body is refused with 411: every Perspective
client sends its length), the answer written in one piece. It runs inside the online service's
event loop, so a call costs the parse of a request line and a few headers, not a web framework's
(0.24 ms of CPU per trivial call at 300/s, against 0.42 ms under uvicorn's pure-Python parser:
BENCHMARKS.md). :class:`AnalyzeApp` reads the key from ``?key=`` (what Perspective's clients
send) or the ``x-goog-api-key`` header, refuses a body over ``max_body_bytes`` with 413 before
reading it, hands the rest to the :class:`~online.perspective.analyze.Analyzer` and answers JSON:
the scores, or Google's error shape. Nothing about a request's body is logged; a failure logs
its type only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import orjson

from common.logs import get_logger
from online.perspective.errors import PerspectiveError

__all__ = ["ANALYZE_PATH", "AnalyzeApp", "Answer", "Connection", "PerspectiveServer", "Request"]

_log = get_logger(__name__)
ANALYZE_PATH = "/v1alpha1/comments:analyze"
_MAX_HEAD_BYTES = 16_384
_IDLE_S = 30.0
"""A connection with no request under way is closed after this long (also bounds a client that
sends its head slowly)."""

Analyze = Callable[[str | None, bytes], Awaitable[dict[str, object]]]
Record = Callable[[str, float], None]
"""Hears of each finished call: its status (``OK`` or the error's, as gRPC names them) and its
seconds."""


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str
    """The path and query as sent."""
    headers: Mapping[str, str]
    """Lowercased names."""
    body: bytes


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    code: str
    """``OK`` or Google's status name of the error."""


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _error(error: PerspectiveError) -> Answer:
    return Answer(error.http_status, orjson.dumps(error.body()), error.canonical)


def _key(target: str, headers: Mapping[str, str]) -> str | None:
    query = parse_qs(urlsplit(target).query)
    keys = query.get("key")
    if keys:
        return str(keys[0])
    return headers.get("x-goog-api-key")


def too_large(limit: int) -> PerspectiveError:
    """The answer to a body over ``limit`` bytes."""
    return PerspectiveError(
        413,
        "INVALID_ARGUMENT",
        f"Request payload is larger than {limit} bytes.",
        "COMMENT_TOO_LONG",
    )


class AnalyzeApp:
    """One route, JSON in and out (see the module docstring)."""

    def __init__(
        self, analyze: Analyze, *, max_body_bytes: int, record: Record | None = None
    ) -> None:
        self._analyze = analyze
        self.max_body_bytes = max_body_bytes
        self._record = record

    async def answer(self, request: Request) -> Answer:
        """The answer to one request (never raises)."""
        started = time.perf_counter()
        answer = await self._answer(request)
        if self._record is not None:
            self._record(answer.code, time.perf_counter() - started)
        return answer

    def refuse(self, error: PerspectiveError) -> Answer:
        """An answer for a request refused before it was read whole (recorded as a call)."""
        if self._record is not None:
            self._record(error.canonical, 0.0)
        return _error(error)

    async def _answer(self, request: Request) -> Answer:
        try:
            if urlsplit(request.target).path != ANALYZE_PATH:
                raise PerspectiveError(404, "NOT_FOUND", f"No such method; POST {ANALYZE_PATH}.")
            if request.method != "POST":
                raise PerspectiveError(405, "INVALID_ARGUMENT", f"POST {ANALYZE_PATH} only.")
            if len(request.body) > self.max_body_bytes:
                raise too_large(self.max_body_bytes)
            scores = await self._analyze(_key(request.target, request.headers), request.body)
            return Answer(200, orjson.dumps(scores), "OK")
        except PerspectiveError as exc:
            return _error(exc)
        except Exception as exc:
            _log.error("perspective_failed", error_type=type(exc).__name__)
            return _error(PerspectiveError(500, "INTERNAL", "Internal error."))


class Connection(asyncio.Protocol):
    """One client connection: requests read and answered one after the other."""

    def __init__(self, server: PerspectiveServer) -> None:
        self._server = server
        self._app = server.app
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._busy = False
        self._closing = False
        self._idle: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        return self._busy

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._server.connections.add(self)
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        self._transport = None
        if self._idle is not None:
            self._idle.cancel()
        # a running request finishes on its own (its verdict is stored); its answer is dropped

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if not self._busy:
            self._next()
        elif len(self._buffer) > self._app.max_body_bytes + _MAX_HEAD_BYTES:
            assert self._transport is not None
            self._transport.pause_reading()  # a client sending ahead: resumed once answered

    def close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(_IDLE_S, self.close)

    def _next(self) -> None:
        """Start the next complete request in the buffer, if there is one."""
        if self._closing or self._transport is None:
            return
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > _MAX_HEAD_BYTES:
                self._finish(_error(PerspectiveError(431, "INVALID_ARGUMENT", "Header too large.")))
            return
        try:
            method, target, version, headers = _head(bytes(self._buffer[:end]))
        except ValueError:
            self._finish(_error(PerspectiveError.invalid("Malformed HTTP request.")))
            return
        if "transfer-encoding" in headers:
            self._finish(
                _error(PerspectiveError(411, "INVALID_ARGUMENT", "Send a Content-Length body."))
            )
            return
        try:
            length = int(headers.get("content-length", "0"))
            if length < 0:
                raise ValueError(length)
        except ValueError:
            self._finish(_error(PerspectiveError.invalid("Bad Content-Length.")))
            return
        if length > self._app.max_body_bytes:
            self._finish(self._app.refuse(too_large(self._app.max_body_bytes)))
            return
        start = end + 4
        if len(self._buffer) < start + length:
            return  # the rest of the body is on its way
        body = bytes(self._buffer[start : start + length])
        del self._buffer[: start + length]
        connection = headers.get("connection", "").lower()
        keep = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        self._busy = True
        if self._idle is not None:
            self._idle.cancel()
        task = asyncio.get_running_loop().create_task(
            self._serve(Request(method, target, headers, body), keep)
        )
        self._server.track(task)

    async def _serve(self, request: Request, keep: bool) -> None:
        answer = await self._app.answer(request)
        self._busy = False
        self._write(answer, keep)
        if keep and not self._closing and self._transport is not None:
            self._transport.resume_reading()
            self._arm_idle()
            self._next()

    def _finish(self, answer: Answer) -> None:
        """Answer and close (the stream cannot be read further)."""
        self._write(answer, keep=False)

    def _write(self, answer: Answer, keep: bool) -> None:
        transport = self._transport
        if transport is None:
            return
        keep = keep and not self._server.stopping
        head = (
            f"HTTP/1.1 {answer.status} {_REASONS.get(answer.status, 'Error')}\r\n"
            "Content-Type: application/json; charset=UTF-8\r\n"
            f"Content-Length: {len(answer.body)}\r\n"
            f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
        )
        transport.write(head.encode("latin-1") + answer.body)
        if not keep:
            self.close()


def _head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """The request line and headers (names lowercased); ``ValueError`` when malformed."""
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(version)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(line)
        headers[name.strip().lower()] = value.strip()
    return method, target, version, headers


class PerspectiveServer:
    """Serves an :class:`AnalyzeApp` on ``host:port`` (0: a free port) in this event loop."""

    def __init__(self, app: AnalyzeApp, host: str, port: int, *, grace_s: float = 5.0) -> None:
        self.app = app
        self._host = host
        self._port = port
        self._grace_s = grace_s
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopping = False

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    def track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        """Listen (TCP_NODELAY on every connection: asyncio sets it for TCP sockets)."""
        if self._server is None:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(
                lambda: Connection(self), self._host, self._port
            )

    async def stop(self) -> None:
        """Stop listening, close idle connections, give running requests ``grace_s``."""
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping = True
        server.close()
        for connection in list(self.connections):
            if not connection.busy:
                connection.close()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self._grace_s)
        for connection in list(self.connections):
            connection.close()
        await server.wait_closed()
