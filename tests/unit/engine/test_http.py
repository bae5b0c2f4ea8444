"""Tests for engine.http: health, readiness and metrics over raw HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from engine.http import HealthServer
from engine.metrics import Metrics


class Readiness:
    """A readiness callable the test flips."""

    def __init__(self) -> None:
        self.ok = False

    def __call__(self) -> tuple[bool, str]:
        return (True, "ready") if self.ok else (False, "starting")


@pytest.fixture
def readiness() -> Readiness:
    return Readiness()


@pytest.fixture
async def server(readiness: Readiness) -> AsyncIterator[HealthServer]:
    metrics = Metrics()
    metrics.records_total.inc(3)
    health = HealthServer("127.0.0.1", 0, metrics, readiness)
    await health.start()
    try:
        yield health
    finally:
        await health.stop()
        await health.stop()  # stopping twice is safe


async def _request(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """Send one raw HTTP/1.1 request; return status code, headers and body."""
    async with asyncio.timeout(5.0):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(
                f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: t\r\n\r\n".encode()
            )
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
            await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


async def test_port_zero_binds_an_ephemeral_port(server: HealthServer) -> None:
    """Configured with port 0, the server reports the port it actually bound."""
    assert server.port > 0


async def test_healthz_is_ok(server: HealthServer) -> None:
    """/healthz answers 200 while the process runs, with a correct Content-Length."""
    status, headers, body = await _request(server.port, "GET", "/healthz")
    assert status == 200
    assert body == b"ok\n"
    assert int(headers["content-length"]) == len(body)


async def test_readyz_follows_the_readiness_callable(
    server: HealthServer, readiness: Readiness
) -> None:
    """/readyz is 503 with the reason until the callable reports ready, then 200."""
    status, _, body = await _request(server.port, "GET", "/readyz")
    assert (status, body) == (503, b"starting\n")
    readiness.ok = True
    status, _, body = await _request(server.port, "GET", "/readyz?verbose=1")
    assert (status, body) == (200, b"ready\n")


async def test_metrics_are_exposed(server: HealthServer) -> None:
    """/metrics serves the worker's registry in Prometheus text format."""
    status, headers, body = await _request(server.port, "GET", "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain")
    assert b"modstream_records_total 3.0" in body


async def test_unknown_path_is_404(server: HealthServer) -> None:
    """Paths other than the three endpoints are 404."""
    status, _, _ = await _request(server.port, "GET", "/admin")
    assert status == 404


async def test_post_is_405(server: HealthServer) -> None:
    """Only GET is served; other methods get 405."""
    status, _, _ = await _request(server.port, "POST", "/healthz")
    assert status == 405


async def test_garbage_request_line_does_not_kill_the_server(server: HealthServer) -> None:
    """A malformed request gets an error answer and later requests still work."""
    async with asyncio.timeout(5.0):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"\r\n")
        await writer.drain()
        answer = await reader.read()
        writer.close()
        await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 405")
    status, _, _ = await _request(server.port, "GET", "/healthz")
    assert status == 200
