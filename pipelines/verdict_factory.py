"""The one way a ``Verdict`` is made: a message's stored facts, its rule outcome, model scores.

The stream, the re-scorer and the benchmark all decide a message the same way (``decide``
over the rule outcome and the scores, rules only when there are no scores) and keep the same
facts about it; this module is where that happens, so the three cannot drift apart.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.tenants import DEFAULT_TENANT
from pipelines.verdict import Verdict

__all__ = ["NO_MODEL", "MessageFacts", "ModelRun", "make_verdict", "text_sha256"]


def text_sha256(text: str) -> str:
    """The hex SHA-256 of ``text`` (UTF-8): what a verdict keeps instead of the text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """What a verdict keeps about its message: where it came from, who sent it, a text hash."""

    position: SourcePosition
    message_id: str
    group_id: str
    sender_id: str
    sent_at: datetime
    text_sha256: str
    tenant: str = DEFAULT_TENANT

    @classmethod
    def of(cls, position: SourcePosition, message: ChatMessage) -> MessageFacts:
        """The facts of a decoded ``message`` read at ``position`` (the text is hashed)."""
        return cls(
            position=position,
            message_id=message.message_id,
            group_id=message.group_id,
            sender_id=message.sender_id,
            sent_at=message.sent_at,
            text_sha256=text_sha256(message.text),
            tenant=message.tenant,
        )

    @classmethod
    def of_verdict(cls, verdict: Verdict) -> MessageFacts:
        """The facts a stored ``verdict`` kept about its message (to decide it again)."""
        return cls(
            position=verdict.position,
            message_id=verdict.message_id,
            group_id=verdict.group_id,
            sender_id=verdict.sender_id,
            sent_at=verdict.sent_at,
            text_sha256=verdict.text_sha256,
            tenant=verdict.tenant,
        )


@dataclass(frozen=True, slots=True)
class ModelRun:
    """The model call behind a batch of verdicts; every field is ``None`` when there was none."""

    model_name: str | None = None
    model_version: str | None = None
    batch_id: str | None = None
    inference_ms: float | None = None


NO_MODEL = ModelRun()
"""Verdicts no model call took part in (rule blocks, the benchmark's naive loop)."""


def make_verdict(
    facts: MessageFacts,
    outcome: RuleOutcome,
    scores: ModelScores | None,
    thresholds: PolicyThresholds,
    run: ModelRun,
    *,
    queue_ms: float,
) -> Verdict:
    """Decide the message and return its verdict; without ``scores`` the rules decide alone."""
    result = decide(outcome, scores, thresholds, model_available=scores is not None)
    return Verdict(
        position=facts.position,
        message_id=facts.message_id,
        group_id=facts.group_id,
        sender_id=facts.sender_id,
        sent_at=facts.sent_at,
        text_sha256=facts.text_sha256,
        rule_hits=outcome.hits,
        scores=scores,
        result=result,
        model_name=run.model_name,
        model_version=run.model_version,
        batch_id=run.batch_id,
        queue_ms=queue_ms,
        inference_ms=run.inference_ms,
        tenant=facts.tenant,
    )
