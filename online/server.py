"""The gRPC server: ``ModerationService``, health, reflection, token authentication, TLS.

``ModerationService`` is served from hand-written method handlers over the generated message
classes (no generated servicer code). ``grpc.health.v1.Health`` answers ``SERVING`` for the
empty name and for ``modstream.v1.ModerationService`` only while the model and PostgreSQL are
reachable (``app`` sets it); reflection lists all three services, so ``grpcurl`` needs no
``.proto``. Errors are answered with the status of their ``OnlineError`` type and a detail that
names codes and fields, never message text. Each ``ModerationService`` method is recorded and
behind the token check (``online.guard``); no interceptors.
"""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import grpc
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from online.api import moderation_pb2 as pb
from online.auth import TokenCheck
from online.errors import InvalidMessage, OnlineError, TenantNotAllowed
from online.guard import Handler, guarded
from online.metrics import MethodCalls, OnlineMetrics
from online.moderator import OnlineModerator
from online.request import message_from_request
from online.response import check_response
from online.settings import OnlineSection
from pipelines.messages import ChatMessage

__all__ = [
    "SERVICE_NAME",
    "ModerationServicer",
    "build_server",
    "server_credentials",
    "set_health",
]

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["ModerationService"].full_name


async def _abort(context: aio.ServicerContext[Any, Any], error: OnlineError) -> NoReturn:
    await context.abort(error.status, error.detail)
    raise AssertionError("abort returned")  # pragma: no cover - abort always raises


class ModerationServicer:
    """``CheckMessage`` and ``CheckMessages`` over an :class:`OnlineModerator`."""

    def __init__(
        self, moderator: OnlineModerator, settings: OnlineSection, *, max_message_bytes: int
    ) -> None:
        self._moderator = moderator
        self._settings = settings
        self._max_bytes = max_message_bytes
        self._tokens: TokenCheck | None = None
        """The token check the handler was built with: whose tenants a call may speak for."""

    async def _check_tenants(
        self, context: aio.ServicerContext[Any, Any], method: str, messages: list[ChatMessage]
    ) -> None:
        """Refuse (``TenantNotAllowed``, recorded) a call with a message for a tenant its token
        is not bound to; without a token check (``online.require_token`` off) every tenant."""
        if self._tokens is None:
            return
        grant = await self._tokens.grant_of(context.invocation_metadata(), method)
        if grant is None:
            raise TenantNotAllowed("the token no longer speaks for any tenant")
        for message in messages:
            if message.tenant not in grant.tenants:
                await self._tokens.deny(grant, method, message.tenant)
                raise TenantNotAllowed("this token may not send messages for that tenant")

    async def check_message(
        self, request: pb.CheckMessageRequest, context: aio.ServicerContext[Any, Any]
    ) -> pb.CheckMessageResponse:
        try:
            message = message_from_request(request, max_bytes=self._max_bytes)
            await self._check_tenants(context, f"/{SERVICE_NAME}/CheckMessage", [message])
            deadline = self._moderator.deadline_for(context.time_remaining())
            with self._moderator.admit():
                answer = await self._moderator.check(message, deadline)
        except OnlineError as exc:
            await _abort(context, exc)
        return check_response(answer)

    async def check_messages(
        self, request: pb.CheckMessagesRequest, context: aio.ServicerContext[Any, Any]
    ) -> pb.CheckMessagesResponse:
        limit = self._settings.max_batch_messages
        try:
            if len(request.messages) > limit:
                raise InvalidMessage("too_many_messages", f"at most {limit} messages per call")
            messages = []
            for index, item in enumerate(request.messages):
                try:
                    messages.append(message_from_request(item, max_bytes=self._max_bytes))
                except InvalidMessage as exc:
                    raise InvalidMessage(exc.code, f"messages[{index}]: {exc.detail}") from exc
            await self._check_tenants(context, f"/{SERVICE_NAME}/CheckMessages", messages)
            deadline = self._moderator.deadline_for(context.time_remaining())
            with self._moderator.admit(len(messages)):
                answers = await asyncio.gather(
                    *(self._moderator.check(m, deadline) for m in messages)
                )
        except OnlineError as exc:
            await _abort(context, exc)
        return pb.CheckMessagesResponse(results=[check_response(a) for a in answers])

    def handler(self, metrics: OnlineMetrics, tokens: TokenCheck | None) -> grpc.GenericRpcHandler:
        """Both methods, each recorded in ``metrics`` and behind ``tokens`` (``online.guard``;
        ``None``: no token needed; then a call may speak for every tenant)."""
        self._tokens = tokens

        def method(name: str, handle: Handler[Any, Any]) -> Handler[Any, Any]:
            return guarded(handle, MethodCalls(metrics, name), tokens, f"/{SERVICE_NAME}/{name}")

        return grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                "CheckMessage": grpc.unary_unary_rpc_method_handler(
                    method("CheckMessage", self.check_message),
                    request_deserializer=pb.CheckMessageRequest.FromString,
                    response_serializer=pb.CheckMessageResponse.SerializeToString,
                ),
                "CheckMessages": grpc.unary_unary_rpc_method_handler(
                    method("CheckMessages", self.check_messages),
                    request_deserializer=pb.CheckMessagesRequest.FromString,
                    response_serializer=pb.CheckMessagesResponse.SerializeToString,
                ),
            },
        )


def server_credentials(settings: OnlineSection) -> grpc.ServerCredentials | None:
    """TLS credentials from the configured PEM files, or ``None`` for plaintext."""
    if settings.tls_private_key is None or settings.tls_certificate_chain is None:
        return None
    key = settings.tls_private_key.read_bytes()
    chain = settings.tls_certificate_chain.read_bytes()
    client_ca = settings.tls_client_ca.read_bytes() if settings.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(key, chain)],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


def build_server(
    servicer: ModerationServicer,
    health_servicer: health.aio.HealthServicer,
    metrics: OnlineMetrics,
    tokens: TokenCheck | None,
) -> aio.Server:
    """A server with the moderation, health and reflection services (ports not yet bound);
    moderation calls are recorded in ``metrics`` and need a token when ``tokens`` is given."""
    server = aio.server()
    server.add_generic_rpc_handlers((servicer.handler(metrics, tokens),))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    return server


async def set_health(health_servicer: health.aio.HealthServicer, serving: bool) -> None:
    """Report the whole server and ``ModerationService`` as serving, or not."""
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, status)
