"""The online service with TLS: a client trusting its CA gets verdicts, a plaintext one cannot."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from online.api import moderation_pb2 as pb
from stack.certificates import ensure_server_certificate
from tests.integration.online_support import (
    CHECK,
    make_token,
    online_settings_for,
    request,
    running_service,
)

pytestmark = pytest.mark.integration


async def test_tls_serves_trusting_clients_and_refuses_plaintext(
    database: str, topics: dict[str, str], tmp_path: Path
) -> None:
    """With a certificate configured, a TLS call answers and a plaintext call fails UNAVAILABLE."""
    certificate = ensure_server_certificate(tmp_path / "tls", ["localhost", "127.0.0.1"])
    settings = online_settings_for(
        database,
        topics,
        tls_certificate_chain=certificate.cert,
        tls_private_key=certificate.key,
    )
    token = await make_token(database)
    metadata = (("authorization", f"Bearer {token}"),)
    credentials = grpc.ssl_channel_credentials(certificate.ca_cert.read_bytes())
    async with running_service(settings) as service:
        address = f"127.0.0.1:{service.port}"
        async with grpc.aio.secure_channel(address, credentials) as channel:
            check = channel.unary_unary(
                CHECK,
                request_serializer=pb.CheckMessageRequest.SerializeToString,
                response_deserializer=pb.CheckMessageResponse.FromString,
            )
            answer = await check(request("good morning everyone"), metadata=metadata, timeout=5)
        async with grpc.aio.insecure_channel(address) as channel:
            plain = channel.unary_unary(
                CHECK,
                request_serializer=pb.CheckMessageRequest.SerializeToString,
                response_deserializer=pb.CheckMessageResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await plain(request("good morning everyone"), metadata=metadata, timeout=3)
    assert answer.decided_by == "model"
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
