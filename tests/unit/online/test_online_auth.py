"""online.auth: only platform tokens pass, accepted ones are cached, probes need no token."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from common.api_tokens import digest, new_token
from online.auth import TokenAuthInterceptor, bearer_token


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


class Details:
    def __init__(self, method: str, metadata: tuple[tuple[str, str], ...]) -> None:
        self.method = method
        self.invocation_metadata = metadata


class Aborted(Exception):
    pass


class Context:
    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        raise Aborted(details)


PASSED = object()


async def _continuation(details: Any) -> Any:
    return PASSED


async def _outcome(
    interceptor: TokenAuthInterceptor, method: str, token: str | None
) -> grpc.StatusCode | None:
    """None when the call went through; otherwise the status its refusal answers with."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    handler: Any = await interceptor.intercept_service(_continuation, Details(method, metadata))  # type: ignore[arg-type]
    if handler is PASSED:
        return None
    context = Context()
    with pytest.raises(Aborted):
        await handler.unary_unary(b"", context)
    return context.code


CHECK = "/modstream.v1.ModerationService/CheckMessage"


def test_bearer_tokens_are_read_from_the_authorization_entry_only() -> None:
    """The scheme is case-insensitive; other keys, other schemes and blanks yield nothing."""
    assert bearer_token((("authorization", "Bearer abc"),)) == "abc"
    assert bearer_token((("x", "y"), ("Authorization", "bearer  abc "))) == "abc"
    assert bearer_token((("authorization", "Basic abc"),)) is None
    assert bearer_token((("authorization", "Bearer "),)) is None
    assert bearer_token(None) is None


async def test_platform_tokens_pass_and_are_looked_up_once_within_the_cache_time() -> None:
    """Two calls with one platform token cost one look-up; the second is served from cache."""
    token = new_token()
    users = Users({token: "platform"})
    interceptor = TokenAuthInterceptor(lambda: users, cache_s=30.0)
    assert await _outcome(interceptor, CHECK, token) is None
    assert await _outcome(interceptor, CHECK, token) is None
    assert users.lookups == 1


async def test_missing_unknown_and_review_tokens_are_unauthenticated() -> None:
    """No token, an unknown token and a moderator's token are all refused UNAUTHENTICATED."""
    moderator = new_token()
    interceptor = TokenAuthInterceptor(lambda: Users({moderator: "moderator"}), cache_s=30.0)
    for token in (None, new_token(), moderator):
        assert await _outcome(interceptor, CHECK, token) is grpc.StatusCode.UNAUTHENTICATED


async def test_health_and_reflection_need_no_token() -> None:
    """Probes and grpcurl's listing reach their services without credentials."""
    interceptor = TokenAuthInterceptor(lambda: Users({}), cache_s=30.0)
    for method in (
        "/grpc.health.v1.Health/Check",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ):
        assert await _outcome(interceptor, method, None) is None


async def test_an_unreachable_database_is_unavailable_not_a_pass() -> None:
    """When tokens cannot be checked the call is refused UNAVAILABLE (never let through)."""
    users = Users({})
    users.down = True
    interceptor = TokenAuthInterceptor(lambda: users, cache_s=30.0)
    assert await _outcome(interceptor, CHECK, new_token()) is grpc.StatusCode.UNAVAILABLE
