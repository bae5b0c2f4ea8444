"""API tokens of ``review_users``: made, hashed and looked up the same way by every service.

A token is 256 random bits with a public prefix, shown once when its user is created; only its
SHA-256 is stored. A lookup goes by digest and then compares the stored digest with
``hmac.compare_digest``, so neither the token nor its digest leaks through timing. The review
service (moderators, admins) and the online service (chat servers, role ``platform``) both
authenticate through :func:`find_token_owner` and then decide which roles they accept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "MAX_TOKEN_CHARS",
    "TOKEN_PREFIX",
    "TokenOwner",
    "TokenReader",
    "digest",
    "find_token_owner",
    "new_token",
]

TOKEN_PREFIX = "msr_"  # noqa: S105 - a public prefix, not a secret
MAX_TOKEN_CHARS = 256
"""Longer strings are refused before hashing: no token is ever that long."""

_SELECT_OWNER = (
    "SELECT id, name, role, categories, tenants, token_sha256 FROM review_users "
    "WHERE token_sha256 = $1 AND disabled_at IS NULL"
)


class TokenReader(Protocol):
    """What a lookup needs: an asyncpg connection, a pooled one, or the pool itself."""

    async def fetchrow(self, query: str, *args: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class TokenOwner:
    """The enabled user a token belongs to; ``role`` is the stored role name."""

    id: int
    name: str
    role: str
    categories: tuple[str, ...] | None
    """The user's review categories (``None``: every category)."""
    tenants: tuple[str, ...] | None = None
    """The tenants the user is bound to (``None``: unbound; what that allows depends on the
    role: docs/tenants.md)."""


def new_token() -> str:
    """A fresh API token (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """Hex SHA-256 of a token or session id: what the database stores."""
    return hashlib.sha256(secret.encode()).hexdigest()


async def find_token_owner(reader: TokenReader, token: str) -> TokenOwner | None:
    """The enabled user owning ``token``, or ``None`` (malformed, unknown or disabled)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return None
    wanted = digest(token)
    row = await reader.fetchrow(_SELECT_OWNER, wanted)
    if row is None or not hmac.compare_digest(str(row["token_sha256"]), wanted):
        return None
    categories = row["categories"]
    tenants = row["tenants"]
    return TokenOwner(
        id=int(row["id"]),
        name=str(row["name"]),
        role=str(row["role"]),
        categories=None if categories is None else tuple(categories),
        tenants=None if tenants is None else tuple(tenants),
    )
