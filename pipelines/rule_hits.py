"""What the rule engine reports: which rules matched, where, and whether that settles the
message.

A hit's ``spans`` say where the rule matched as offsets into the *raw* message text (Python
string indices, i.e. Unicode code points, ``end`` exclusive), mapped back from the canonical
text through every reading (``pipelines.canonical.trace``); never the text itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

from pipelines.errors import PipelineError
from pipelines.severe_harm import SHIPPED, SevereTable

__all__ = [
    "HitSpan",
    "RuleAction",
    "RuleHit",
    "RuleHitError",
    "RuleOutcome",
    "Severity",
    "spans_from_json",
]

_PAIR = 2
HitSpan = tuple[int, int]
"""``(start, end)`` in the raw message text, ``0 <= start < end``."""


class RuleHitError(PipelineError):
    """A stored or published rule hit whose spans are not offsets."""


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
    spans: tuple[HitSpan, ...] = ()
    """Where the rule matched in the raw text, in order, not overlapping; empty for rules
    about the sender rather than the words (and for hits stored before spans were kept)."""

    def as_dict(self) -> dict[str, object]:
        """The stored form (``verdicts.rule_hits``); ``yields_to_model`` and ``spans`` (a list
        of ``[start, end]``) only when set, so hits without them keep the form they always
        had."""
        out: dict[str, object] = {
            "rule_id": self.rule_id,
            "category": self.category,
            "severity": self.severity.name.lower(),
            "action": self.action.value,
        }
        if self.yields_to_model:
            out["yields_to_model"] = True
        if self.spans:
            out["spans"] = [[start, end] for start, end in self.spans]
        return out


def spans_from_json(value: object) -> tuple[HitSpan, ...]:
    """A hit's stored ``spans`` (absent in hits stored before spans were kept: ``None``)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise RuleHitError("rule hit spans must be a list of [start, end] pairs")
    spans: list[HitSpan] = []
    for item in value:
        if (
            not isinstance(item, list | tuple)
            or len(item) != _PAIR
            or not all(isinstance(bound, int) and not isinstance(bound, bool) for bound in item)
            or not 0 <= item[0] < item[1]
        ):
            raise RuleHitError("a rule hit span must be [start, end] with 0 <= start < end")
        spans.append((item[0], item[1]))
    return tuple(spans)


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """All hits for one message, most severe first."""

    hits: tuple[RuleHit, ...] = ()
    severe: SevereTable = SHIPPED
    """The severe categories of the rules that made it (a tenant's layer may add some,
    ``pipelines.rules.layers``): the policy gives their hits the severe treatment."""

    @property
    def is_decisive(self) -> bool:
        """True when a ``block`` rule matched: no model call is needed."""
        return any(hit.action is RuleAction.BLOCK for hit in self.hits)

    @property
    def wants_escalation(self) -> bool:
        return any(hit.action is RuleAction.ESCALATE for hit in self.hits)
