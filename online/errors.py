"""Why a check gets no verdict: typed errors, each answered with one gRPC status code.

Every ``detail`` names codes, fields and limits only, never the message text or a token.
"""

from __future__ import annotations

from typing import ClassVar

import grpc

__all__ = [
    "InvalidMessage",
    "MessageIdTaken",
    "NotDecided",
    "OnlineError",
    "Overloaded",
    "StoreDown",
    "TenantNotAllowed",
    "Unauthenticated",
]


class OnlineError(Exception):
    """A check refused or failed; ``status`` is what the caller receives."""

    status: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidMessage(OnlineError):
    """The request fails the stream's decoder; ``code`` is the decoder's reason code."""

    status = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code


class Overloaded(OnlineError):
    """The bounded queue is full: refused at once, the caller may retry later."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class StoreDown(OnlineError):
    """PostgreSQL cannot be reached, so no verdict can be made durable now."""

    status = grpc.StatusCode.UNAVAILABLE


class NotDecided(OnlineError):
    """The pipeline stored no verdict for the message (PostgreSQL refused its row)."""

    status = grpc.StatusCode.INTERNAL


class Unauthenticated(OnlineError):
    """No bearer token, or one that belongs to no enabled platform user."""

    status = grpc.StatusCode.UNAUTHENTICATED


class TenantNotAllowed(OnlineError):
    """The message names a tenant the caller's token is not bound to (recorded as a denial)."""

    status = grpc.StatusCode.PERMISSION_DENIED


class MessageIdTaken(OnlineError):
    """The message id was first checked for another tenant: its verdict is not this caller's."""

    status = grpc.StatusCode.ALREADY_EXISTS
