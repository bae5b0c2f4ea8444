"""online.auth: only platform tokens pass, accepted ones are cached (no look-up, no hashing)."""

from __future__ import annotations

from typing import Any

import grpc

from common.api_tokens import digest, new_token
from online.auth import TokenCheck, bearer_token


class Users:
    """Token owners by digest; counts look-ups; ``down`` raises like an unreachable database."""

    def __init__(
        self, roles: dict[str, str], tenants: dict[str, list[str] | None] | None = None
    ) -> None:
        self.rows = {
            digest(token): {
                "id": 1,
                "name": "n",
                "role": role,
                "categories": None,
                "tenants": (tenants or {}).get(token),
                "token_sha256": digest(token),
            }
            for token, role in roles.items()
        }
        self.lookups = 0
        self.down = False
        self.denials: list[tuple[Any, ...]] = []

    async def fetchrow(self, query: str, *args: Any) -> Any:
        if self.down:
            raise OSError("connection refused")
        if query.startswith("INSERT INTO access_denials"):
            self.denials.append(args)
            return {"id": len(self.denials)}
        self.lookups += 1
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


async def test_a_token_speaks_for_its_bound_tenants_an_unbound_one_for_the_default() -> None:
    """The grant of an accepted token names its bound tenants; an unbound (older) token's is
    the default tenant alone. A denial is recorded with the tenant asked for, never the token."""
    bound, unbound = new_token(), new_token()
    users = Users({bound: "platform", unbound: "platform"}, {bound: ["arcade", "market"]})
    check = TokenCheck(lambda: users, cache_s=30.0)
    grants = {}
    for token in (bound, unbound):
        metadata = (("authorization", f"Bearer {token}"),)
        assert await check.refusal(metadata, CHECK) is None
        grants[token] = await check.grant_of(metadata, CHECK)
    assert grants[bound] is not None
    assert grants[bound].tenants == {"arcade", "market"}
    assert grants[unbound] is not None
    assert grants[unbound].tenants == {"default"}
    assert users.lookups == 2  # the grant comes from the cache
    await check.deny(grants[unbound], CHECK, "arcade")
    assert users.denials == [("n", "platform", CHECK, "arcade")]
    assert all(bound not in map(str, args) for args in users.denials)


async def test_no_grant_without_a_token_or_for_a_disabled_one() -> None:
    """A call without a token, or whose token no longer passes, has no grant."""
    token = new_token()
    users = Users({token: "platform"})
    check = TokenCheck(lambda: users, cache_s=30.0)
    assert await check.grant_of((), CHECK) is None
    users.rows.clear()
    assert await check.grant_of((("authorization", f"Bearer {token}"),), CHECK) is None


async def test_a_denial_that_cannot_be_recorded_still_refuses() -> None:
    """PostgreSQL away when a denial is recorded: deny() returns (the call is refused anyway)."""
    token = new_token()
    users = Users({token: "platform"})
    check = TokenCheck(lambda: users, cache_s=30.0)
    metadata = (("authorization", f"Bearer {token}"),)
    assert await check.refusal(metadata, CHECK) is None
    grant = await check.grant_of(metadata, CHECK)
    assert grant is not None
    users.down = True
    await check.deny(grant, CHECK, "market")
    assert users.denials == []
