"""common.api_tokens: tokens are hashed, looked up by digest, and only enabled owners match."""

from __future__ import annotations

import hashlib
from typing import Any

from common.api_tokens import TOKEN_PREFIX, digest, find_token_owner, new_token


class FakeUsers:
    """Answers the owner query from a dict of digest -> row, recording the digests asked for."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        self.rows = rows
        self.asked: list[str] = []

    async def fetchrow(self, query: str, *args: Any) -> Any:
        self.asked.append(args[0])
        return self.rows.get(args[0])


def _row(token: str, role: str = "platform") -> dict[str, Any]:
    return {
        "id": 7,
        "name": "chat-server",
        "role": role,
        "categories": None,
        "tenants": None,
        "token_sha256": digest(token),
    }


def test_digest_is_sha256_hex_of_the_token() -> None:
    """The stored form of a token is its SHA-256 hex digest, never the token itself."""
    token = new_token()
    assert token.startswith(TOKEN_PREFIX)
    assert digest(token) == hashlib.sha256(token.encode()).hexdigest()


async def test_lookup_finds_the_owner_by_digest_only() -> None:
    """A known token yields its owner with its role; the query carried only the digest."""
    token = new_token()
    users = FakeUsers({digest(token): _row(token)})
    owner = await find_token_owner(users, token)
    assert owner is not None
    assert (owner.id, owner.name, owner.role, owner.categories) == (
        7,
        "chat-server",
        "platform",
        None,
    )
    assert users.asked == [digest(token)]


async def test_unknown_malformed_and_oversized_tokens_have_no_owner() -> None:
    """Unknown tokens find nobody; unprefixed or absurdly long ones are refused before a query."""
    users = FakeUsers({})
    assert await find_token_owner(users, new_token()) is None
    assert await find_token_owner(users, "Bearer nonsense") is None
    assert await find_token_owner(users, TOKEN_PREFIX + "x" * 300) is None
    assert len(users.asked) == 1
