"""online.auth: only platform tokens pass, accepted ones are cached (no look-up, no hashing)."""

from __future__ import annotations

from typing import Any

import grpc

from common.api_tokens import digest, new_token
from online.auth import TokenCheck, bearer_token


class Users:
    """Token owners by digest; counts look-ups; ``down`` raises like an unreachable database."""

    def __init__(self, roles: dict[str, str]) -> None:
        self.rows = {
            digest(token): {
                "id": 1,
                "name": "n",
                "role": role,
                "categories": None,
                "token_sha256": digest(token),
            }
            for token, role in roles.items()
        }
        self.lookups = 0
        self.down = False

    async def fetchrow(self, query: str, *args: Any) -> Any:
        self.lookups += 1
        if self.down:
            raise OSError("connection refused")
        return self.rows.get(args[0])


CHECK = "/modstream.v1.ModerationService/CheckMessage"


async def _outcome(check: TokenCheck, token: str | None) -> grpc.StatusCode | None:
    """None when the call may go on; otherwise the status its refusal answers with."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    refusal = await check.refusal(metadata, CHECK)
    return None if refusal is None else refusal[0]


def test_bearer_tokens_are_read_from_the_authorization_entry_only() -> None:
    """The scheme is case-insensitive; other keys, other schemes and blanks yield nothing."""
    assert bearer_token((("authorization", "Bearer abc"),)) == "abc"
    assert bearer_token((("x", "y"), ("Authorization", "bearer  abc "))) == "abc"
    assert bearer_token((("authorization", "Basic abc"),)) is None
    assert bearer_token((("authorization", "Bearer "),)) is None
    assert bearer_token(None) is None


async def test_platform_tokens_pass_and_are_looked_up_once_within_the_cache_time() -> None:
    """Two calls with one platform token cost one look-up; the second is served from cache,
    until the cache time has passed."""
    token = new_token()
    users = Users({token: "platform"})
    now = [0.0]
    check = TokenCheck(lambda: users, cache_s=30.0, clock=lambda: now[0])
    assert await _outcome(check, token) is None
    assert await _outcome(check, token) is None
    assert users.lookups == 1
    now[0] = 31.0
    assert await _outcome(check, token) is None
    assert users.lookups == 2


async def test_missing_unknown_and_review_tokens_are_unauthenticated() -> None:
    """No token, an unknown token and a moderator's token are all refused UNAUTHENTICATED."""
    moderator = new_token()
    check = TokenCheck(lambda: Users({moderator: "moderator"}), cache_s=30.0)
    for token in (None, new_token(), moderator):
        assert await _outcome(check, token) is grpc.StatusCode.UNAUTHENTICATED


async def test_a_disabled_token_is_refused_once_its_cache_time_has_passed() -> None:
    """A token accepted, then no longer a platform user's, passes until the cache runs out."""
    token = new_token()
    users = Users({token: "platform"})
    now = [0.0]
    check = TokenCheck(lambda: users, cache_s=30.0, clock=lambda: now[0])
    assert await _outcome(check, token) is None
    users.rows.clear()
    assert await _outcome(check, token) is None
    now[0] = 30.5
    assert await _outcome(check, token) is grpc.StatusCode.UNAUTHENTICATED


async def test_an_unreachable_database_is_unavailable_not_a_pass() -> None:
    """When tokens cannot be checked the call is refused UNAVAILABLE (never let through)."""
    users = Users({})
    users.down = True
    check = TokenCheck(lambda: users, cache_s=30.0)
    assert await _outcome(check, new_token()) is grpc.StatusCode.UNAVAILABLE
