"""The verdict: what modstream decided about one message, and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pipelines.attribution import ModelAttribution
from pipelines.messages import SourcePosition
from pipelines.rule_hits import RuleHit
from pipelines.scores import ModelScores
from pipelines.tenants import DEFAULT_TENANT

__all__ = ["DecidedBy", "Decision", "PolicyResult", "Verdict"]


class Decision(StrEnum):
    """What the platform should do with the message."""

    ALLOW = "allow"
    FLAG = "flag"
    BLOCK = "block"


class DecidedBy(StrEnum):
    """Which stage settled the decision.

    ``rules``: a block rule matched, no model was asked. ``model``: the policy weighed model scores
    (and any non-blocking rule hits). ``pending_model``: the model was unreachable, the decision is
    from rules alone and the message waits to be re-scored.
    """

    RULES = "rules"
    MODEL = "model"
    PENDING_MODEL = "pending_model"


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The policy's answer for one message."""

    decision: Decision
    decided_by: DecidedBy
    escalate: bool
    category: str | None
    """The category that drove the decision (``None`` for a plain allow)."""
    priority: float
    """Review priority in [0, 1]; only meaningful when ``escalate`` is true."""
    reasons: tuple[str, ...] = ()
    """Short machine-readable reasons, e.g. ``toxicity.hate>=0.80`` or ``rule:en.slur.1``."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Everything stored for one source record. Holds a hash of the text, never the text."""

    position: SourcePosition
    message_id: str
    group_id: str
    sender_id: str
    sent_at: datetime
    text_sha256: str
    rule_hits: tuple[RuleHit, ...]
    scores: ModelScores | None
    result: PolicyResult
    model_name: str | None
    model_version: str | None
    batch_id: str | None
    queue_ms: float
    inference_ms: float | None
    model_spans: ModelAttribution | None = None
    """The words that moved the model's decision (``pipelines.attribution``): raw-text offsets
    and drops, for escalated verdicts the model decided; ``None`` for every other verdict, and
    when the attribution's extra model call failed."""
    tenant: str = DEFAULT_TENANT
    """The community the message belongs to (``ChatMessage.tenant``): stored on the verdict's
    row, its review item and its published record."""
