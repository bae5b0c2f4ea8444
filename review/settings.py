"""The review service's settings: the shared sections plus the review section.

Loaded once at ``modstream review``'s entry point (``MODSTREAM_REVIEW__PORT=18091`` ...).
"""

from __future__ import annotations

from pydantic import Field

from common.settings import Section, ServiceSettings

__all__ = ["ReviewServiceSettings", "ReviewSettings"]


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
    cookie_secure: bool = False
    """Mark the console cookie ``Secure``; turn on whenever the console is served over HTTPS."""
    publish_retry_s: float = Field(default=5.0, gt=0)
    """How often unpublished decisions (Kafka was down) are retried."""


class ReviewServiceSettings(ServiceSettings):
    """Everything ``modstream review`` reads."""

    review: ReviewSettings = ReviewSettings()
