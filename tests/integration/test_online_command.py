"""`modstream online` as a process: it becomes SERVING and exits 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.integration.conftest import free_ports, wait_until

pytestmark = pytest.mark.integration


async def test_the_command_serves_until_sigterm_and_exits_cleanly(
    database: str, topics: dict[str, str]
) -> None:
    """The process answers SERVING on its health service, then stops with status 0."""
    port = free_ports(1)[0]
    env = {
        **os.environ,
        "MODSTREAM_POSTGRES__DSN": database,
        "MODSTREAM_KAFKA__VERDICT_TOPIC": topics["verdict_topic"],
        "MODSTREAM_ONLINE__HEALTH_INTERVAL_S": "0.3",
        "MODSTREAM_PERSPECTIVE__PORT": "0",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "modstream.cli", "online", "--port", str(port), env=env
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )

            async def serving() -> bool:
                try:
                    reply = await check(health_pb2.HealthCheckRequest(), timeout=1)
                except grpc.aio.AioRpcError:
                    return False
                return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

            await wait_until(serving, 60)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
