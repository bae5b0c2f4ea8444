"""One record on its way through the pipeline, from its source to a verdict or a dead letter."""

from __future__ import annotations

from dataclasses import dataclass

from engine.offsets import PartitionKey
from pipelines.decode import DecodeError
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.rule_hits import RuleOutcome

__all__ = ["Work"]


@dataclass(slots=True)
class Work:
    """A fetched record (or an online check) and what has been learnt about it so far."""

    position: SourcePosition
    kafka_key: bytes | None
    fetched_at: float
    message: ChatMessage | None = None
    outcome: RuleOutcome | None = None
    error: DecodeError | None = None
    raw: bytes | None = None
    """Original bytes, kept only for records that will be dead-lettered."""
    model_text: str | None = None
    """The canonical text the rules matched, which is what the model scores (the raw text is
    what is stored and shown to moderators). Set with ``outcome`` (``engine.rule_stage``)."""
    produced_at: float | None = None
    """The Kafka record's timestamp (epoch seconds), when it has one."""

    @property
    def partition_key(self) -> PartitionKey:
        return (self.position.topic, self.position.partition)
