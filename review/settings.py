"""The review service's settings: the shared sections plus the review section.

Loaded once at ``modstream review``'s entry point (``MODSTREAM_REVIEW__PORT=18091`` ...).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from common.settings import Section, ServiceSettings

__all__ = ["LOOPBACK_HOSTS", "CookieSecure", "ReviewServiceSettings", "ReviewSettings"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""Hosts that only this machine can reach: ``cookie_secure = auto`` leaves cookies plain there."""


class CookieSecure(StrEnum):
    """Whether the console cookie is marked ``Secure``."""

    AUTO = "auto"
    """On unless ``review.host`` is a loopback address (a local, plain-HTTP console)."""
    ON = "on"
    OFF = "off"


class ReviewSettings(Section):
    """The review API and console (``modstream review serve``)."""

    host: str = "127.0.0.1"
    port: int = 18090
    claim_ttl_s: int = Field(default=600, ge=10)
    """A claim not decided or released within this returns its item to the queue."""
    max_claims_per_user: int = Field(default=5, ge=1)
    strike_decay_days: int = Field(default=30, ge=1)
    """A strike stops counting towards ``metadata.sender_strikes`` after this many days."""
    repeat_offender_weight: float = 0.1
    """Queue rank added per active strike of the sender (capped at five strikes)."""
    age_weight_per_hour: float = 0.02
    """Queue rank added per hour an item has waited (capped at 24 hours)."""
    confidence_weight: float = 0.2
    """Queue rank added per unit of the model's highest harmful probability."""
    session_ttl_s: int = Field(default=43_200, ge=60)
    """Console sign-ins last this long."""
    cookie_secure: CookieSecure = CookieSecure.AUTO
    """Mark the console cookie ``Secure``: ``auto`` (on unless bound to loopback), ``on``, ``off``.

    ``true``/``false`` (the old boolean form) still read as ``on``/``off``.
    """
    max_body_bytes: int = Field(default=65_536, ge=1024)
    """Request bodies over this many bytes are refused with 413 on every route."""
    max_reason_chars: int = Field(default=1000, ge=1, le=100_000)
    """A decision's reason may be at most this long (it travels in the Kafka record)."""
    sign_in_attempts_per_minute: int = Field(default=10, ge=1)
    """Per client address: console sign-ins, and API calls with a token that is not valid."""
    publish_retry_s: float = Field(default=5.0, gt=0)
    """How often unpublished decisions (Kafka was down) are retried."""
    publish_max_attempts: int = Field(default=5, ge=1)
    """A decision Kafka refuses for itself (e.g. too large) is tried this often, then marked
    failed with the reason (kept for an admin) so later decisions are not held behind it."""

    moderator_target_s: float = Field(default=3_600.0, gt=0)
    """How soon an item of the moderators' queue should be decided: ``/metrics`` exports it
    beside the queue's oldest item, and the alert rules fire when an item is older."""
    admin_target_s: float = Field(default=14_400.0, gt=0)
    """The same for the admins' queue (escalations take longer)."""
    appeals_target_s: float = Field(default=172_800.0, gt=0)
    """How soon an appeal should be decided: each appeal's deadline (``due_at``) is its filing
    time plus this, and ``/metrics`` counts the queue's items past their target as overdue."""
    max_statement_chars: int = Field(default=2_000, ge=1, le=20_000)
    """An appellant's statement may be at most this long (refused with ``statement_too_long``)."""
    appeals_consumer: bool = True
    """Whether ``modstream review serve`` reads appeals from ``kafka.appeal_topic``."""
    appeals_group_id: str = "modstream-review-appeals"
    """The consumer group of that reader (every review instance shares it)."""
    appeals_retry_s: float = Field(default=2.0, gt=0)
    """How long the reader waits before it tries a record again after PostgreSQL or Kafka
    failed it (the record is never skipped)."""
    context_before: int = Field(default=10, ge=0, le=100)
    """The item view's conversation: at most this many of the group's messages before the
    escalated one (``review.conversation``)."""
    context_after: int = Field(default=10, ge=0, le=100)
    """... and at most this many after it."""
    context_hours: float = Field(default=24.0, gt=0, le=24 * 30)
    """... sent within this many hours of it."""

    @property
    def queue_targets_s(self) -> dict[str, float]:
        """Each queue's decision target in seconds."""
        return {
            "moderator": self.moderator_target_s,
            "admin": self.admin_target_s,
            "appeals": self.appeals_target_s,
        }

    @field_validator("cookie_secure", mode="before")
    @classmethod
    def _boolean_cookie_secure(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return CookieSecure.ON if value else CookieSecure.OFF
        if isinstance(value, str) and value.strip().lower() in {"true", "1", "yes"}:
            return CookieSecure.ON
        if isinstance(value, str) and value.strip().lower() in {"false", "0", "no"}:
            return CookieSecure.OFF
        return value

    @property
    def secure_cookies(self) -> bool:
        """Whether the console cookie gets the ``Secure`` flag, ``auto`` resolved by ``host``."""
        if self.cookie_secure is CookieSecure.AUTO:
            return self.host.strip().strip("[]").lower() not in LOOPBACK_HOSTS
        return self.cookie_secure is CookieSecure.ON


class ReviewServiceSettings(ServiceSettings):
    """Everything ``modstream review`` reads."""

    review: ReviewSettings = ReviewSettings()
