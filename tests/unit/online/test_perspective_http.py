"""The HTTP/1.1 connection protocol over a fake transport (no socket): keep-alive, several
requests in one read, bodies split across reads, and the refusals that close the connection."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from online.perspective.http import ANALYZE_PATH, AnalyzeApp, Connection, PerspectiveServer


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.paused = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def _answers(raw: bytes) -> list[tuple[int, dict[str, str], Any]]:
    """The responses in ``raw``: status, headers, JSON body."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        length = int(headers["Content-Length"])
        out.append((int(lines[0].split(" ")[1]), headers, orjson.loads(rest[:length])))
        raw = rest[length:]
    return out


def _post(body: bytes, *extra: str, target: str = f"{ANALYZE_PATH}?key=k") -> bytes:
    head = [f"POST {target} HTTP/1.1", "Host: x", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _connect(
    max_body_bytes: int = 1024,
) -> tuple[Connection, FakeTransport, list[bytes]]:
    bodies: list[bytes] = []

    async def analyze(key: str | None, body: bytes) -> dict[str, object]:
        bodies.append(body)
        return {"key": key, "n": len(bodies)}

    server = PerspectiveServer(AnalyzeApp(analyze, max_body_bytes=max_body_bytes), "x", 0)
    protocol = Connection(server)
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport, bodies


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_two_requests_in_one_read_are_answered_in_order_and_the_connection_kept() -> None:
    protocol, transport, bodies = await _connect()
    protocol.data_received(_post(b'{"a":1}') + _post(b'{"b":2}'))
    await _settle()
    answers = _answers(bytes(transport.written))
    assert [(status, body) for status, _, body in answers] == [
        (200, {"key": "k", "n": 1}),
        (200, {"key": "k", "n": 2}),
    ]
    assert all(h["Connection"] == "keep-alive" for _, h, _ in answers)
    assert bodies == [b'{"a":1}', b'{"b":2}']
    assert not transport.closed
    protocol.connection_lost(None)


async def test_a_body_split_across_reads_waits_for_its_last_byte() -> None:
    protocol, _, bodies = await _connect()
    raw = _post(b'{"text": "split"}')
    protocol.data_received(raw[:30])
    protocol.data_received(raw[30:-3])
    await _settle()
    assert bodies == []
    protocol.data_received(raw[-3:])
    await _settle()
    assert bodies == [b'{"text": "split"}']
    protocol.connection_lost(None)


async def test_connection_close_is_honoured() -> None:
    protocol, transport, _ = await _connect()
    protocol.data_received(_post(b"{}", "Connection: close"))
    await _settle()
    ((status, headers, _),) = _answers(bytes(transport.written))
    assert (status, headers["Connection"]) == (200, "close")
    assert transport.closed


async def test_refusals_that_cannot_read_on_close_the_connection() -> None:
    for raw, status in (
        (_post(b"x" * 2000), 413),  # declared too long: refused before it is read
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"garbage\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"X" * 20_000, 431),
    ):
        protocol, transport, bodies = await _connect()
        protocol.data_received(raw)
        await _settle()
        ((answered, _, body),) = _answers(bytes(transport.written))
        assert answered == status, raw[:40]
        assert "error" in body
        assert transport.closed
        assert bodies == []
