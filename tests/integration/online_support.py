"""Helpers for the online service's integration tests: a running service, a token, a client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg
import grpc
from pydantic import SecretStr

from online.api import moderation_pb2 as pb
from online.app import OnlineService
from online.settings import OnlineSettings
from review.auth import create_user
from review.schemas import Role

__all__ = [
    "Client",
    "make_token",
    "online_settings_for",
    "request",
    "running_service",
]

CHECK = "/modstream.v1.ModerationService/CheckMessage"
CHECK_MANY = "/modstream.v1.ModerationService/CheckMessages"


def online_settings_for(database: str, topics: dict[str, str], **online: Any) -> OnlineSettings:
    """OnlineSettings on this test's database and topics, free ports and quick loops."""
    base = OnlineSettings()
    section = {"port": 0, "health_interval_s": 0.3, **online}
    return base.model_copy(
        update={
            "kafka": base.kafka.model_copy(update=topics),
            "postgres": base.postgres.model_copy(update={"dsn": SecretStr(database)}),
            "online": base.online.model_copy(update=section),
            "http": base.http.model_copy(update={"port": 0}),
            "perspective": base.perspective.model_copy(update={"port": 0}),
            "reliability": base.reliability.model_copy(
                update={"rescore_interval_s": 0.3, "outbox_interval_s": 0.3}
            ),
        }
    )


@asynccontextmanager
async def running_service(settings: OnlineSettings) -> AsyncIterator[OnlineService]:
    """Run the service until the block ends; fail fast if it cannot start."""
    stop = asyncio.Event()
    service = OnlineService(settings, grace_s=1.0, drain_s=3.0)
    task = asyncio.create_task(service.run(stop))
    ready = asyncio.create_task(service.ready.wait())
    await asyncio.wait({task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        ready.cancel()
        task.result()
    assert service.ready.is_set(), "online service did not start within 60 s"
    try:
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def make_token(dsn: str, role: Role = Role.PLATFORM) -> str:
    """A new user of ``role`` and its token."""
    conn = await asyncpg.connect(dsn)
    try:
        return await create_user(conn, f"{role.value}-{uuid.uuid4().hex[:8]}", role)
    finally:
        await conn.close()


def request(text: str, message_id: str | None = None, **fields: Any) -> pb.CheckMessageRequest:
    """A valid request for ``text`` (fields may override or blank any part)."""
    values: dict[str, Any] = {
        "message_id": message_id or f"m-{uuid.uuid4().hex}",
        "group_id": "g-1",
        "sender_id": "u-1",
        "text": text,
        "sent_at": datetime.now(UTC),
    }
    values.update(fields)
    return pb.CheckMessageRequest(**{k: v for k, v in values.items() if v is not None})


class Client:
    """A plaintext channel to the service, with an optional bearer token."""

    def __init__(self, port: int, token: str | None) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._check = self.channel.unary_unary(
            CHECK,
            request_serializer=pb.CheckMessageRequest.SerializeToString,
            response_deserializer=pb.CheckMessageResponse.FromString,
        )
        self._check_many = self.channel.unary_unary(
            CHECK_MANY,
            request_serializer=pb.CheckMessagesRequest.SerializeToString,
            response_deserializer=pb.CheckMessagesResponse.FromString,
        )

    async def check(
        self, req: pb.CheckMessageRequest, deadline_s: float = 5.0
    ) -> pb.CheckMessageResponse:
        response: pb.CheckMessageResponse = await self._check(
            req, metadata=self.metadata, timeout=deadline_s
        )
        return response

    async def check_many(
        self, reqs: list[pb.CheckMessageRequest], deadline_s: float = 5.0
    ) -> pb.CheckMessagesResponse:
        response: pb.CheckMessagesResponse = await self._check_many(
            pb.CheckMessagesRequest(messages=reqs), metadata=self.metadata, timeout=deadline_s
        )
        return response

    async def close(self) -> None:
        await self.channel.close()
