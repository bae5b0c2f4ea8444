"""Token and session helpers: random, prefixed tokens; SHA-256 digests; constant-time CSRF."""

from __future__ import annotations

import hashlib

from review.auth import ConsoleSession, digest, new_token
from review.schemas import Role, User


def test_tokens_are_random_prefixed_and_long() -> None:
    """Every token is new, starts with msr_ and carries at least 256 bits of randomness."""
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        assert token.startswith("msr_")
        assert len(token) >= 4 + 43


def test_digest_is_sha256_hex() -> None:
    """The stored form of a token is its SHA-256 hex digest, never the token."""
    token = new_token()
    assert digest(token) == hashlib.sha256(token.encode()).hexdigest()
    assert token not in digest(token)


def test_csrf_check_accepts_only_the_session_token() -> None:
    """check_csrf is true for the session's own token and false for anything else."""
    session = ConsoleSession(User(id=1, name="a", role=Role.MODERATOR), "tok-123")
    assert session.check_csrf("tok-123")
    assert not session.check_csrf("tok-124")
    assert not session.check_csrf("")
