"""Bearer-token authentication of chat servers: ``authorization: Bearer <token>`` metadata.

Tokens are ``review_users`` tokens of role ``platform`` (``modstream review add-user chat-server
--role platform``), looked up by ``common.api_tokens`` (only digests are stored). An accepted
token is remembered by digest for ``token_cache_s``, so a call costs no query; a disabled user is
refused once that time has passed. The health and reflection services need no token (probes
and ``grpcurl list`` come from infrastructure); every other method does, and is refused with
``UNAUTHENTICATED`` otherwise (``UNAVAILABLE`` while the token cannot be checked). Tokens are
never logged.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from grpc import aio

from common.api_tokens import TokenReader, digest, find_token_owner
from common.logs import get_logger
from online.errors import OnlineError

__all__ = ["OPEN_SERVICES", "PLATFORM_ROLE", "TokenAuthInterceptor", "bearer_token"]

_log = get_logger(__name__)
_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
PLATFORM_ROLE = "platform"
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
"""Method prefixes callable without a token."""


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer ...`` entry of call ``metadata``, if any."""
    for key, value in metadata or ():
        if key.lower() != "authorization" or not isinstance(value, str):
            continue
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


class _LookupFailed(OnlineError):
    """The token could not be checked (PostgreSQL away)."""

    status = grpc.StatusCode.UNAVAILABLE


def _refuse(detail: str, code: grpc.StatusCode) -> grpc.RpcMethodHandler[Any, Any]:
    async def abort(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(code, detail)

    return grpc.unary_unary_rpc_method_handler(abort)


# The refusals are made once: the same handler object answers every refused call of a kind
# (``online.metrics`` wraps a handler once and reuses the wrapper while the object is the same).
_MISSING = _refuse("missing bearer token", grpc.StatusCode.UNAUTHENTICATED)
_CANNOT_CHECK = _refuse("cannot check the token now", grpc.StatusCode.UNAVAILABLE)
_REFUSED = _refuse("token refused", grpc.StatusCode.UNAUTHENTICATED)


class TokenAuthInterceptor(aio.ServerInterceptor):
    def __init__(
        self,
        reader: Callable[[], TokenReader],
        *,
        cache_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._cache_s = cache_s
        self._clock = clock
        self._accepted: dict[str, float] = {}
        """Digest of an accepted token -> when to look it up again."""

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_Req, _Resp] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Resp] | None:
        method = handler_call_details.method
        if method.startswith(OPEN_SERVICES):
            return await continuation(handler_call_details)
        token = bearer_token(handler_call_details.invocation_metadata)
        if token is None:
            return _MISSING
        try:
            accepted = await self._accepts(token)
        except _LookupFailed:
            return _CANNOT_CHECK
        if not accepted:
            _log.warning("online_token_refused", method=method)
            return _REFUSED
        return await continuation(handler_call_details)

    async def _accepts(self, token: str) -> bool:
        key = digest(token)
        now = self._clock()
        if self._accepted.get(key, -1.0) > now:
            return True
        try:
            owner = await find_token_owner(self._reader(), token)
        except Exception as exc:  # PostgreSQL away: refuse, never let an unknown token pass
            _log.warning("online_token_lookup_failed", error=type(exc).__name__)
            raise _LookupFailed("cannot check the token now") from exc
        if owner is None or owner.role != PLATFORM_ROLE:
            self._accepted.pop(key, None)
            return False
        if len(self._accepted) > 10_000:
            self._accepted.clear()  # simple bound; entries are cheap to look up again
        self._accepted[key] = now + self._cache_s
        return True
