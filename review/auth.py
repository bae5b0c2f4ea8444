"""API tokens and console sessions: random secrets, stored only as SHA-256 digests.

A token is shown once, when it is created. Tokens are made, hashed and looked up by
``common.api_tokens`` (the online service authenticates chat servers the same way); the review
service accepts its own roles, and a ``platform`` token only where a chat server files and reads
appeals (``/api/appeals``): it opens nothing else of the API and never the console.
"""

from __future__ import annotations

import hmac
import secrets
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

from common.api_tokens import digest, find_token_owner, new_token
from pipelines.tenants import check_tenant_id
from review.errors import UserExistsError
from review.schemas import Role, User

__all__ = [
    "Conn",
    "ConsoleSession",
    "authenticate_platform",
    "authenticate_session",
    "authenticate_token",
    "create_user",
    "digest",
    "disable_user",
    "end_session",
    "new_token",
    "start_session",
]

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

Conn: TypeAlias = "asyncpg.Connection[Any] | PoolConnectionProxy[Any]"
"""A plain connection or one borrowed from a pool."""

_REVIEW_ROLES = frozenset({Role.MODERATOR.value, Role.ADMIN.value})
"""The roles that may use the review API and console (not ``platform``)."""


def _user(row: asyncpg.Record) -> User:
    categories = row["categories"]
    tenants = row["tenants"]
    return User(
        id=row["id"],
        name=row["name"],
        role=Role(row["role"]),
        categories=None if categories is None else tuple(categories),
        tenants=None if tenants is None else tuple(tenants),
    )


async def create_user(
    conn: Conn,
    name: str,
    role: Role,
    categories: list[str] | None = None,
    tenants: list[str] | None = None,
) -> str:
    """Create a user and return its token; the token is not stored and cannot be shown again.

    ``categories`` are the user's queues within their role's (``None``: every category).
    ``tenants`` are the tenants the user is bound to (``None``: unbound, which is every tenant
    for an admin and the default tenant alone for a moderator or a platform token).
    """
    if categories is not None and not categories:
        raise ValueError("categories must name at least one category, or be None for all")
    if tenants is not None:
        if not tenants:
            raise ValueError("tenants must name at least one tenant, or be None for unbound")
        for tenant in tenants:
            check_tenant_id(tenant)
    token = new_token()
    try:
        await conn.execute(
            "INSERT INTO review_users (name, role, token_sha256, categories, tenants) "
            "VALUES ($1, $2, $3, $4::text[], $5::text[])",
            name,
            role.value,
            digest(token),
            categories,
            tenants,
        )
    except asyncpg.UniqueViolationError as exc:
        raise UserExistsError(f"user {name!r} already exists") from exc
    return token


async def disable_user(conn: Conn, name: str) -> bool:
    """Revoke a user's token and end its console sessions; False when no such enabled user."""
    user_id = await conn.fetchval(
        "UPDATE review_users SET disabled_at = now() WHERE name = $1 AND disabled_at IS NULL "
        "RETURNING id",
        name,
    )
    if user_id is None:
        return False
    await conn.execute("DELETE FROM review_sessions WHERE user_id = $1", user_id)
    return True


async def authenticate_token(conn: Conn, token: str) -> User | None:
    """The enabled moderator or admin owning ``token``, or ``None`` (platform tokens too)."""
    owner = await find_token_owner(conn, token)
    if owner is None or owner.role not in _REVIEW_ROLES:
        return None
    return User(
        id=owner.id,
        name=owner.name,
        role=Role(owner.role),
        categories=owner.categories,
        tenants=owner.tenants,
    )


async def authenticate_platform(conn: Conn, token: str) -> User | None:
    """The enabled ``platform`` user (a chat server) owning ``token``, or ``None``; it may file
    and read appeals, nothing else of the review service."""
    owner = await find_token_owner(conn, token)
    if owner is None or owner.role != Role.PLATFORM.value:
        return None
    return User(
        id=owner.id, name=owner.name, role=Role.PLATFORM, categories=None, tenants=owner.tenants
    )


class ConsoleSession:
    """A signed-in console user and the CSRF token its forms must echo."""

    __slots__ = ("csrf_token", "user")

    def __init__(self, user: User, csrf_token: str) -> None:
        self.user = user
        self.csrf_token = csrf_token

    def check_csrf(self, submitted: str) -> bool:
        return hmac.compare_digest(self.csrf_token.encode(), submitted.encode())


async def start_session(conn: Conn, user: User, ttl_s: int) -> str:
    """Open a console session for ``user``; returns the cookie value (a random id)."""
    session_id = secrets.token_urlsafe(32)
    await conn.execute(
        "INSERT INTO review_sessions (id_sha256, user_id, csrf_token, expires_at) "
        "VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
        digest(session_id),
        user.id,
        secrets.token_urlsafe(24),
        float(ttl_s),
    )
    await conn.execute("DELETE FROM review_sessions WHERE expires_at < now()")
    return session_id


async def authenticate_session(conn: Conn, session_id: str) -> ConsoleSession | None:
    """The live session behind a cookie value, or ``None``."""
    if not session_id or len(session_id) > 256:
        return None
    wanted = digest(session_id)
    row = await conn.fetchrow(
        "SELECT u.id, u.name, u.role, u.categories, u.tenants, s.id_sha256, s.csrf_token "
        "FROM review_sessions s JOIN review_users u ON u.id = s.user_id "
        "WHERE s.id_sha256 = $1 AND s.expires_at > now() AND u.disabled_at IS NULL",
        wanted,
    )
    if row is None or not hmac.compare_digest(row["id_sha256"], wanted):
        return None
    return ConsoleSession(_user(row), row["csrf_token"])


async def end_session(conn: Conn, session_id: str) -> None:
    await conn.execute("DELETE FROM review_sessions WHERE id_sha256 = $1", digest(session_id))
