"""Bearer-token authentication of chat servers: ``authorization: Bearer <token>`` metadata.

Tokens are ``review_users`` tokens of role ``platform`` (``modstream review add-user chat-server
--role platform``), looked up by ``common.api_tokens`` (only digests are stored). An accepted
token is remembered for ``token_cache_s``, so a call costs no query and no hashing (the token as
sent is the key: the process holds it while the call runs anyway); a disabled user is refused once
that time has passed. Every ``ModerationService`` call is checked (``online.guard``), and refused
with ``UNAUTHENTICATED`` when it carries no platform token (``UNAVAILABLE`` while the token cannot
be checked); the health and reflection services need no token (probes and ``grpcurl list`` come
from infrastructure). Tokens are never logged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

from common.api_tokens import TokenReader, find_token_owner
from common.logs import get_logger

__all__ = ["PLATFORM_ROLE", "Refusal", "TokenCheck", "bearer_token"]

_log = get_logger(__name__)
PLATFORM_ROLE = "platform"

Refusal = tuple[grpc.StatusCode, str]
"""The status and detail a refused call is answered with."""

_MISSING: Refusal = (grpc.StatusCode.UNAUTHENTICATED, "missing bearer token")
_CANNOT_CHECK: Refusal = (grpc.StatusCode.UNAVAILABLE, "cannot check the token now")
_REFUSED: Refusal = (grpc.StatusCode.UNAUTHENTICATED, "token refused")
_MAX_REMEMBERED = 10_000


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
        self._accepted: dict[str, float] = {}
        """An accepted token -> when to look it up again."""

    async def refusal(self, metadata: Any, method: str) -> Refusal | None:
        """``None`` when the call of ``method`` may go on, else how to refuse it."""
        token = bearer_token(metadata)
        if token is None:
            return _MISSING
        if self._accepted.get(token, -1.0) > self._clock():
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
        self._accepted[token] = self._clock() + self._cache_s
        return None
