"""The chat message a platform publishes, and where in Kafka it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pipelines.tenants import DEFAULT_TENANT

__all__ = ["ChatMessage", "PartitionKey", "SourcePosition"]


@dataclass(frozen=True, slots=True)
class SourcePosition:
    """The Kafka coordinates of one record: the idempotency key of its verdict."""

    topic: str
    partition: int
    offset: int


PartitionKey = tuple[str, int]
"""(topic, partition): where a consumer's offsets are kept."""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One validated chat message (see the README's message schema).

    ``metadata`` is free-form platform context. Keys the rule engine understands are documented
    in the README (for example ``sender_joined_at`` for new-account rules). ``tenant`` is the
    community the message belongs to (``pipelines.tenants``): its rules and policy decide it.
    """

    message_id: str
    group_id: str
    sender_id: str
    text: str
    sent_at: datetime
    metadata: Mapping[str, object] = field(default_factory=dict)
    tenant: str = DEFAULT_TENANT
