"""Bearer-token authentication of chat servers: ``authorization: Bearer <token>`` metadata.

Tokens are ``review_users`` tokens of role ``platform`` (``modstream review add-user chat-server
--role platform``), looked up by ``common.api_tokens`` (only digests are stored). An accepted
token is remembered for ``token_cache_s``, so a call costs no query and no hashing (the token as
sent is the key: the process holds it while the call runs anyway); a disabled user is refused once
that time has passed. Every ``ModerationService`` call is checked (``online.guard``), and refused
with ``UNAUTHENTICATED`` when it carries no platform token (``UNAVAILABLE`` while the token cannot
be checked); the health and reflection services need no token (probes and ``grpcurl list`` come
from infrastructure). Tokens are never logged.

A platform token speaks for the tenants it is bound to (``review_users.tenants``); an unbound
token for the default tenant only, so a token made before tenants existed keeps working for the
messages it always sent and cannot speak for a new tenant. The servicer asks
:meth:`TokenCheck.grant_of` after decoding a message; a message for another tenant is refused
with ``PERMISSION_DENIED`` and recorded in ``access_denials`` (:meth:`TokenCheck.deny`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from common.api_tokens import TokenReader, find_token_owner
from common.logs import get_logger
from pipelines.tenants import DEFAULT_TENANT

__all__ = ["PLATFORM_ROLE", "Grant", "Refusal", "TokenCheck", "bearer_token"]

_log = get_logger(__name__)
PLATFORM_ROLE = "platform"

Refusal = tuple[grpc.StatusCode, str]
"""The status and detail a refused call is answered with."""

_MISSING: Refusal = (grpc.StatusCode.UNAUTHENTICATED, "missing bearer token")
_CANNOT_CHECK: Refusal = (grpc.StatusCode.UNAVAILABLE, "cannot check the token now")
_REFUSED: Refusal = (grpc.StatusCode.UNAUTHENTICATED, "token refused")
_MAX_REMEMBERED = 10_000

_RECORD_DENIAL = (
    "INSERT INTO access_denials (service, actor, actor_role, action, tenant) "
    "VALUES ('online', $1, $2, $3, $4) RETURNING id"
)


@dataclass(frozen=True, slots=True)
class Grant:
    """What an accepted token may do: whose it is and the tenants it speaks for."""

    name: str
    tenants: frozenset[str]
    """Its bound tenants; the default tenant alone for an unbound token."""


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer ...`` entry of call ``metadata``, if any."""
    for key, value in metadata or ():
        if key.lower() != "authorization" or not isinstance(value, str):
            continue
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


class TokenCheck:
    """Whether a call's metadata carries an enabled platform token (see the module docstring)."""

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
        self._accepted: dict[str, tuple[float, Grant]] = {}
        """An accepted token -> when to look it up again, and what it may do."""

    async def refusal(self, metadata: Any, method: str) -> Refusal | None:
        """``None`` when the call of ``method`` may go on, else how to refuse it."""
        token = bearer_token(metadata)
        if token is None:
            return _MISSING
        remembered = self._accepted.get(token)
        if remembered is not None and remembered[0] > self._clock():
            return None
        try:
            owner = await find_token_owner(self._reader(), token)
        except Exception as exc:  # PostgreSQL away: refuse, never let an unknown token pass
            _log.warning("online_token_lookup_failed", error=type(exc).__name__)
            return _CANNOT_CHECK
        if owner is None or owner.role != PLATFORM_ROLE:
            self._accepted.pop(token, None)
            _log.warning("online_token_refused", method=method)
            return _REFUSED
        if len(self._accepted) >= _MAX_REMEMBERED:
            self._accepted.clear()  # simple bound; entries are cheap to look up again
        tenants = frozenset(owner.tenants or (DEFAULT_TENANT,))
        self._accepted[token] = (self._clock() + self._cache_s, Grant(owner.name, tenants))
        return None

    async def grant_of(self, metadata: Any, method: str) -> Grant | None:
        """What the call's token may do (it passed :meth:`refusal` for this call); ``None`` if
        it no longer passes (disabled meanwhile, or PostgreSQL away)."""
        token = bearer_token(metadata)
        if token is None:
            return None
        remembered = self._accepted.get(token)
        if remembered is None and await self.refusal(metadata, method) is None:
            remembered = self._accepted.get(token)
        return None if remembered is None else remembered[1]

    async def deny(self, grant: Grant, method: str, tenant: str) -> None:
        """Record that ``grant``'s token sent a message for ``tenant``, which it may not speak
        for (``access_denials``; a log line only while PostgreSQL is away)."""
        _log.warning("online_tenant_refused", method=method, actor=grant.name)
        try:
            await self._reader().fetchrow(_RECORD_DENIAL, grant.name, PLATFORM_ROLE, method, tenant)
        except Exception as exc:  # the refusal stands either way
            _log.warning("online_denial_not_recorded", error=type(exc).__name__)
