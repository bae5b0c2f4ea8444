"""A small HTTP endpoint: ``/metrics`` (Prometheus), ``/healthz`` (alive), ``/readyz`` (ready).

Plain ``asyncio`` streams, GET only, one request per connection: enough for probes and scrapes
without pulling a web framework into the worker. The online service serves the same endpoint
beside its gRPC port (its registry, its readiness).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

__all__ = ["HealthServer", "MetricsSource"]


class MetricsSource(Protocol):
    """What ``/metrics`` renders: a service's metrics object with its registry."""

    @property
    def registry(self) -> CollectorRegistry: ...


_MAX_REQUEST_LINE_BYTES = 8192


class HealthServer:
    def __init__(
        self, host: str, port: int, metrics: MetricsSource, ready: Callable[[], tuple[bool, str]]
    ) -> None:
        self._host = host
        self._port = port
        self._metrics = metrics
        self._ready = ready
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when configured as 0)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._handle, self._host, self._port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=5.0)
            if len(line) > _MAX_REQUEST_LINE_BYTES:
                raise ValueError("request line too long")
            parts = line.decode("latin-1").split()
            method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            status, ctype, body = self._route(method, path.split("?", 1)[0])
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError):
            pass
        finally:
            writer.close()

    def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._metrics.registry)
        if path == "/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == "/readyz":
            ok, detail = self._ready()
            status = "200 OK" if ok else "503 Service Unavailable"
            return status, "text/plain", (detail + "\n").encode()
        return "404 Not Found", "text/plain", b"not found\n"
