"""The review API's data shapes (pydantic, so they double as the OpenAPI schema)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipelines.tenants import DEFAULT_TENANT

__all__ = [
    "APPEALS_QUEUE",
    "Action",
    "AppealDecideRequest",
    "AppealDecisionResult",
    "AppealEvidence",
    "AppealFiled",
    "AppealOutcome",
    "AppealRequest",
    "AppealSource",
    "AppealStatus",
    "AppealView",
    "AuditEvent",
    "ClaimResult",
    "DecideRequest",
    "DecisionResult",
    "ItemContext",
    "QueueCount",
    "QueueDepth",
    "QueueFilter",
    "QueueItem",
    "Role",
    "Strike",
    "User",
    "VerdictDetail",
]


class Role(StrEnum):
    MODERATOR = "moderator"
    ADMIN = "admin"
    PLATFORM = "platform"
    """A chat server calling the online service (``modstream online``); never a review user."""


class Action(StrEnum):
    """What a moderator decides. Every action but ``escalate_to_admin`` resolves the item."""

    APPROVE = "approve"
    REMOVE_MESSAGE = "remove_message"
    WARN = "warn"
    MUTE = "mute"
    BAN = "ban"
    ESCALATE_TO_ADMIN = "escalate_to_admin"


APPEALS_QUEUE = "appeals"
"""The queue of appeals' review items (worked by moderators and admins)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class User(_Model):
    id: int
    name: str
    role: Role
    categories: tuple[str, ...] | None = None
    """The categories this user works (``add-user --queues``); ``None`` means every category."""
    tenants: tuple[str, ...] | None = None
    """The tenants this user is bound to (``add-user --tenants``). ``None``: an admin sees every
    tenant, a moderator (and a platform token) the default tenant only."""

    @property
    def queues(self) -> list[str]:
        """Queues this user may see and work: admins work every queue, moderators theirs and
        the appeals (never an appeal of their own decision: ``review.appeals``)."""
        if self.role is Role.ADMIN:
            return ["moderator", "admin", APPEALS_QUEUE]
        if self.role is Role.MODERATOR:
            return ["moderator", APPEALS_QUEUE]
        return []

    @property
    def category_list(self) -> list[str] | None:
        """``categories`` as a SQL array parameter (``None``: no category restriction)."""
        return None if self.categories is None else list(self.categories)

    @property
    def tenant_list(self) -> list[str] | None:
        """The tenants whose items this user may see, as a SQL array parameter (``None``: every
        tenant, for an unbound admin only)."""
        if self.tenants is not None:
            return list(self.tenants)
        return None if self.role is Role.ADMIN else [DEFAULT_TENANT]

    def sees_tenant(self, tenant: str) -> bool:
        """Whether items of ``tenant`` exist for this user (others are answered as not found)."""
        scope = self.tenant_list
        return scope is None or tenant in scope

    def works(self, queue: str, category: str | None) -> bool:
        """Whether an item in ``queue`` with ``category`` is in this user's queues."""
        if queue not in self.queues:
            return False
        return self.categories is None or category in self.categories


class QueueFilter(_Model):
    category: str | None = None
    group_id: str | None = None
    queue: str | None = None
    min_age_s: float | None = Field(default=None, ge=0)
    max_age_s: float | None = Field(default=None, ge=0)
    include_claimed: bool = False
    limit: int = Field(default=50, ge=1, le=500)


class QueueItem(_Model):
    """One queue row. No message text: the listing is for triage, the context view shows text."""

    id: str
    """The item's opaque public id (what ``/api/items/{item_id}`` takes)."""
    queue: str
    status: str
    """``open`` or ``claimed``; a claim past its expiry reads as ``open``."""
    category: str | None
    group_id: str
    sender_id: str
    message_id: str
    priority: float
    confidence: float
    """Highest harmful model probability behind the verdict (0 when no model scored it)."""
    sender_strikes: int
    age_s: float
    rank: float
    """priority + repeat-offender, age and confidence boosts; the queue is ordered by this."""
    claimed_by: str | None
    claim_expires_at: datetime | None
    created_at: datetime
    sent_at: datetime


class QueueCount(_Model):
    queue: str
    category: str | None
    open: int
    claimed: int


class QueueDepth(_Model):
    """One queue's backlog over every category, for ``/metrics``."""

    queue: str
    open: int
    """Unresolved and not held by a live claim (an expired claim counts as open)."""
    claimed: int
    oldest_age_s: float
    """Age of the oldest unresolved item, claimed or not (0 when there is none)."""
    overdue: int = 0
    """Unresolved items past the queue's target (an appeal: past its own deadline)."""


class ClaimResult(_Model):
    item_id: str
    claimed_by: str
    claim_expires_at: datetime


class DecideRequest(_Model):
    action: Action
    reason: str = Field(min_length=1)
    """Bounded by ``review.max_reason_chars`` where every decision is stored (ReviewQueue)."""


class DecisionResult(_Model):
    item_id: str
    action: Action
    decision_id: str | None
    """Carried by the Kafka record; ``None`` for ``escalate_to_admin`` (nothing published)."""
    event_id: int
    decided_at: datetime
    published: bool
    """False when Kafka was unreachable: the decision waits in the outbox and is retried."""


class AuditEvent(_Model):
    id: int
    review_item_id: str
    """The item's public id."""
    actor: str
    action: str
    reason: str | None
    details: dict[str, Any]
    created_at: datetime


class Strike(_Model):
    action: str
    weight: int
    group_id: str
    review_item_id: str
    """The public id of the item whose decision gave the strike."""
    created_at: datetime
    expires_at: datetime


class VerdictDetail(_Model):
    decision: str
    decided_by: str
    category: str | None
    reasons: list[str]
    rule_hits: list[dict[str, Any]]
    scores: dict[str, dict[str, float]] | None
    sentiment_label: str | None
    intent_label: str | None
    toxicity_label: str | None
    model_name: str | None
    model_version: str | None
    batch_id: str | None
    queue_ms: float
    inference_ms: float | None
    model_spans: dict[str, Any] | None = None
    """The words that moved the model's decision (escalated model verdicts): ``{"output": ...,
    "spans": [{"span": [start, end], "drop": ...}]}``, raw-text offsets (README "Verdicts")."""
    created_at: datetime


class TextState(StrEnum):
    """Why a message of the conversation window has its text, or has none."""

    SHOWN = "shown"
    """Retained and in the viewer's queues: ``text`` holds it."""
    NOT_RETAINED = "not_retained"
    """modstream never kept it (neither escalated nor waiting for the model)."""
    CLEARED = "cleared"
    """An escalation whose text retention has cleared."""
    OUTSIDE_QUEUES = "outside_queues"
    """Retained, but its category (or queue) is not one the viewer works."""


class ConversationMessage(_Model):
    """One message of the conversation around an item (``review.conversation``)."""

    message_id: str
    sender_id: str
    same_sender: bool
    """Sent by the escalated message's sender."""
    sent_at: datetime
    decision: str
    category: str | None
    is_item: bool
    """The escalated message itself."""
    text: str | None
    """The message text when ``text_state`` is ``shown``, else ``None``."""
    text_state: TextState


class ItemContext(_Model):
    """Everything a moderator needs to decide one item."""

    item: dict[str, Any]
    """The item; ``message_text`` is ``None`` unless ``text_visible``."""
    text_visible: bool
    """True when the viewer holds the item's claim (or is an admin); each such view is audited."""
    text_hint: str | None
    """Without ``text_visible``: how to get to see the text (claim the item)."""
    verdict: VerdictDetail | None
    group_messages: list[dict[str, Any]]
    """Earlier escalated messages of the group, newest first; ``message_text`` only with
    ``text_visible`` and only for items in the viewer's queues (else ``None``)."""
    group_verdicts: list[dict[str, Any]]
    """Earlier verdicts in the group (no text: verdicts never store it), newest first."""
    sender_items: list[dict[str, Any]]
    """The sender's other escalations and how they were resolved, newest first."""
    sender_verdict_counts: dict[str, int]
    """The sender's verdicts over the last 30 days, by decision."""
    sender_strikes: int
    strikes: list[Strike]
    events: list[AuditEvent]
    conversation: list[ConversationMessage] = []
    """The group's messages around the item, oldest first, the item among them: only with
    ``text_visible`` (else empty); texts as ``review.conversation`` retains and scopes them."""
    appeal: AppealEvidence | None = None
    """For an item of the ``appeals`` queue: the appeal and the appealed decision (the verdict,
    group, sender and conversation above are the appealed message's)."""


class AppealOutcome(StrEnum):
    """How an appeal ends."""

    UPHELD = "upheld"
    """The decision stands."""
    REVERSED = "reversed"
    """The decision is withdrawn: its strikes are lifted, a correction is published."""


class AppealStatus(StrEnum):
    OPEN = "open"
    UPHELD = "upheld"
    REVERSED = "reversed"


class AppealSource(_Model):
    """The appealed verdict's source coordinates, as ``moderation.verdicts`` carries them."""

    topic: str = Field(min_length=1, max_length=249)
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class AppealRequest(_Model):
    """An appeal as a platform files it (``POST /api/appeals`` or a ``moderation.appeals``
    record). Name the appealed verdict by ``source`` or the moderator's decision by
    ``decision_id`` (exactly one); unknown fields are ignored."""

    appeal_id: str = Field(min_length=1, max_length=128)
    """The platform's id for this appeal: filing it again is a replay (the same appeal back)."""
    decision_id: uuid.UUID | None = None
    """A moderator's decision, as published on ``moderation.decisions``."""
    source: AppealSource | None = None
    """A verdict, as published on ``moderation.verdicts`` (``source_topic`` ...)."""
    appellant_id: str = Field(min_length=1, max_length=128)
    """Who appeals (usually the sender)."""
    statement: str
    """The appellant's words: not blank, no NUL, at most ``review.max_statement_chars``
    (checked where appeals are filed, ``statement_too_long`` past it)."""

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.decision_id is None) == (self.source is None):
            raise ValueError("name exactly one of decision_id and source")
        if not self.statement.strip():
            raise ValueError("statement must not be blank")
        if "\x00" in self.statement:
            raise ValueError("statement must not contain NUL")
        return self


class AppealFiled(_Model):
    """The answer to a filing: the appeal, and whether this call created it."""

    appeal_id: str
    """The appeal's public id (what ``/api/appeals/{appeal_id}`` takes)."""
    appeal_key: str
    """The platform's own id (``appeal_id`` of the request)."""
    item_id: str
    """The public id of the appeal's review item, in the ``appeals`` queue."""
    status: AppealStatus
    filed_at: datetime
    due_at: datetime
    created: bool
    """False for a replay: this appeal id had been filed before; nothing new was made."""


class AppealView(_Model):
    """An appeal and where it stands (no statement: it is shown with the item, to its claim)."""

    appeal_id: str
    appeal_key: str
    item_id: str
    channel: str
    filed_by: str
    appellant_id: str
    message_id: str
    group_id: str
    sender_id: str
    category: str | None
    source: AppealSource
    original_decision: str
    original_decided_by: str
    original_moderator: str | None
    original_decision_id: str | None
    status: AppealStatus
    outcome_reason: str | None
    decided_by: str | None
    decided_at: datetime | None
    correction_id: str | None
    strikes_lifted: int
    filed_at: datetime
    due_at: datetime


class AppealEvidence(_Model):
    """What the handler of an appeal reads beside the verdict: the appeal, the statement (with
    the text, only to the claim holder or an admin), and the appealed decision as it was made."""

    appeal: AppealView
    statement: str | None
    """The appellant's statement when ``text_visible`` (and not yet cleared), else ``None``."""
    original_reason: str | None
    """The reason the moderator gave for the appealed decision (``None`` for a verdict)."""
    original_decided_at: datetime | None
    original_item_id: str | None
    """The public id of the review item the appealed decision resolved."""
    original_events: list[AuditEvent] = []
    """That item's audit trail, newest first."""


class AppealDecideRequest(_Model):
    outcome: AppealOutcome
    reason: str = Field(min_length=1)
    """Bounded by ``review.max_reason_chars``, like every decision's reason."""


class AppealDecisionResult(_Model):
    appeal_id: str
    item_id: str
    outcome: AppealOutcome
    correction_id: str
    """The ``decision_id`` of the correction record on ``moderation.decisions``."""
    strikes_lifted: int
    """The strike weight the reversal lifted, what the sender's live total drops by (0 when
    upheld, or when the appealed decision gave no strike still counting)."""
    event_id: int
    decided_at: datetime
    published: bool


ItemContext.model_rebuild()
