"""What the rule engine reports: which rules matched and whether that settles the message."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

__all__ = ["RuleAction", "RuleHit", "RuleOutcome", "Severity"]


class Severity(IntEnum):
    """How bad a violation is; ordered, so ``max()`` picks the worst."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4


class RuleAction(StrEnum):
    """What a matching rule asks for.

    ``block``: a clear violation; the verdict is given at once without a model call.
    ``escalate``: send to human review whatever the model says (still scored by the model).
    ``flag``: record the hit and let the policy weigh it with the model scores.
    """

    BLOCK = "block"
    ESCALATE = "escalate"
    FLAG = "flag"


@dataclass(frozen=True, slots=True)
class RuleHit:
    """One rule that matched one message. Never carries the message text."""

    rule_id: str
    category: str
    severity: Severity
    action: RuleAction
    yields_to_model: bool = False
    """The rule's ``yields_to_model``: the policy drops this flag when the model is confident the
    message is harmless (``pipelines.policy``)."""

    def as_dict(self) -> dict[str, object]:
        """The stored form (``verdicts.rule_hits``); ``yields_to_model`` only when set, so hits
        of other rules keep the form they always had."""
        out: dict[str, object] = {
            "rule_id": self.rule_id,
            "category": self.category,
            "severity": self.severity.name.lower(),
            "action": self.action.value,
        }
        if self.yields_to_model:
            out["yields_to_model"] = True
        return out


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """All hits for one message, most severe first."""

    hits: tuple[RuleHit, ...] = ()

    @property
    def is_decisive(self) -> bool:
        """True when a ``block`` rule matched: no model call is needed."""
        return any(hit.action is RuleAction.BLOCK for hit in self.hits)

    @property
    def wants_escalation(self) -> bool:
        return any(hit.action is RuleAction.ESCALATE for hit in self.hits)
