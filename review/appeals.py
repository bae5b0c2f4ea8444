"""Filing appeals: a platform contests a verdict or a moderator's decision.

An appeal names what it contests by the verdict's source coordinates (``source``, as
``moderation.verdicts`` carries them) or by a moderator's ``decision_id`` (as
``moderation.decisions`` carries it). Filing, in one transaction, opens a review item in the
``appeals`` queue with the appealed message's evidence (its group, sender, category, automatic
decision and reasons, and its text while modstream still keeps it), records the appeal
(``appeals``: the appellant, the statement, what was decided and by whom, the deadline) and
audits it on the appeal's item and on the appealed item.

What can be appealed: a verdict decided against the message (``flag`` or ``block``) that no
person decided, or a moderator's decision other than ``approve``. A verdict whose escalation is
still waiting for a moderator is refused (``not_appealable``): appeal the decision once made. A
verdict decided by a moderator is appealed as that decision, whichever way it is named.

One appeal per verdict, ever. Filing the same ``appeal_id`` again is a replay: the existing
appeal is answered (``created`` false) and nothing changes, so a platform may retry and the
Kafka reader may see a record twice. Another ``appeal_id`` for a verdict already appealed is
refused (``already_appealed``, naming the existing appeal).

Every refusal is a typed :class:`~review.errors.AppealError`; the statement is never logged.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from common.logs import get_logger
from review.appeal_records import SELECT_APPEAL, appeal_view, optional_text
from review.decisions import encode_payload
from review.errors import (
    AlreadyAppealedError,
    AppealNotFoundError,
    AppealTargetNotFoundError,
    InvalidAppealError,
    NotAppealableError,
    StatementTooLongError,
)
from review.queue import Conn
from review.schemas import (
    APPEALS_QUEUE,
    Action,
    AppealFiled,
    AppealRequest,
    AppealSource,
    AppealStatus,
    AppealView,
)
from review.settings import ReviewSettings

__all__ = ["AppealDesk", "Channel"]

_log = get_logger(__name__)

Channel = str
"""``api`` or ``kafka``: how an appeal arrived."""

_CHANNELS = frozenset({"api", "kafka"})
_AGAINST_THE_MESSAGE = frozenset({"flag", "block"})

_VERDICT_AT = """
SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id,
       decision, decided_by, category, priority, reasons, tenant
FROM verdicts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3
ORDER BY sent_at DESC LIMIT 1
"""

_ITEM_AT = """
SELECT id, status, queue, resolution, resolved_by, message_text, category, priority,
       auto_decision, reasons, sent_at, message_id, group_id, sender_id,
       source_topic, source_partition, source_offset, tenant
FROM review_items
WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3
"""

# The moderator's decision recorded on an item: the latest event that published a decision.
_DECISION_ON_ITEM = """
SELECT (details ->> 'decision_id')::uuid AS decision_id, actor, action, created_at
FROM review_events
WHERE review_item_id = $1 AND details ? 'decision_id'
ORDER BY id DESC LIMIT 1
"""

_DECISION_BY_ID = """
SELECT e.review_item_id, e.actor, e.action
FROM review_events e
WHERE e.details ? 'decision_id' AND e.details ->> 'decision_id' = $1::text
ORDER BY e.id DESC LIMIT 1
"""

_PENDING_TEXT = """
SELECT message_text FROM pending_texts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3
"""

# The appeal's item, in the appeals queue at the appeals' own coordinates (migration 0092).
_OPEN_ITEM = """
SELECT id, public_id::text AS public_id, created_at
FROM modstream_open_appeal_item($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
"""

_INSERT_APPEAL = """
INSERT INTO appeals (appeal_key, channel, filed_by, appellant_id, statement, source_topic,
                     source_partition, source_offset, sent_at, message_id, group_id, sender_id,
                     category, original_decision, original_decided_by, original_moderator,
                     original_decision_id, original_item_id, review_item_id, filed_at, due_at,
                     tenant)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
        $20::timestamptz, $20::timestamptz + make_interval(secs => $21), $22)
RETURNING id, public_id::text AS public_id, filed_at, due_at
"""

_INSERT_EVENT = """
INSERT INTO review_events (review_item_id, actor, action, reason, details)
VALUES ($1, $2, $3, NULL, $4::jsonb)
"""


@dataclass(frozen=True, slots=True)
class _Target:
    """The appealed verdict and the decision under appeal, resolved from the request."""

    source: AppealSource
    sent_at: datetime
    message_id: str
    group_id: str
    sender_id: str
    category: str | None
    priority: float
    reasons: list[str]
    automatic_decision: str
    decision: str
    decided_by: str
    moderator: str | None
    decision_id: uuid.UUID | None
    item_id: int | None
    item_text: str | None
    tenant: str


class AppealDesk:
    """Files appeals and reads them back (``appeals``, ``review_items``, ``review_events``)."""

    def __init__(self, pool: asyncpg.Pool[Any], settings: ReviewSettings) -> None:
        self._pool = pool
        self._settings = settings

    def check_statement(self, statement: str) -> None:
        """Refuse a statement over ``review.max_statement_chars`` (``statement_too_long``)."""
        limit = self._settings.max_statement_chars
        if len(statement) > limit:
            raise StatementTooLongError(
                f"a statement may be at most {limit} characters (this one has {len(statement)})"
            )

    async def file(
        self,
        request: AppealRequest,
        *,
        channel: Channel,
        filed_by: str,
        tenants: Sequence[str] | None = None,
    ) -> AppealFiled:
        """File ``request`` (module docs); a replay of its ``appeal_id`` answers the existing
        appeal with ``created`` false. ``tenants``: the tenants the filer speaks for (``None``:
        every tenant, the platform's own Kafka topic); a verdict of another tenant is answered
        as one that does not exist."""
        if channel not in _CHANNELS:
            raise ValueError(f"unknown appeal channel {channel!r}")
        self.check_statement(request.statement)
        try:
            return await self._file_once(request, channel, filed_by, tenants)
        except asyncpg.UniqueViolationError:
            # Someone filed the same appeal id (or the same verdict) at the same moment: the
            # second look finds it and answers as a replay or a refusal.
            return await self._file_once(request, channel, filed_by, tenants)

    async def _file_once(
        self,
        request: AppealRequest,
        channel: Channel,
        filed_by: str,
        tenants: Sequence[str] | None,
    ) -> AppealFiled:
        async with self._pool.acquire() as conn, conn.transaction():
            existing = await conn.fetchrow(
                SELECT_APPEAL + "WHERE a.appeal_key = $1", request.appeal_id
            )
            if existing is not None and (tenants is None or existing["tenant"] in tenants):
                return self._replay(request, existing)
            if existing is not None:
                raise InvalidAppealError(
                    f"appeal_id {request.appeal_id[:128]!r} already names an appeal of another "
                    "decision"
                )
            target = await self._target(conn, request)
            if tenants is not None and target.tenant not in tenants:
                raise AppealTargetNotFoundError("no such verdict or decision")
            taken = await conn.fetchval(
                "SELECT public_id::text FROM appeals WHERE source_topic = $1 "
                "AND source_partition = $2 AND source_offset = $3",
                target.source.topic,
                target.source.partition,
                target.source.offset,
            )
            if taken is not None:
                raise AlreadyAppealedError(
                    f"message {target.message_id[:128]!r} already has an appeal ({taken}); "
                    "one appeal per verdict",
                    existing_appeal_id=taken,
                )
            text = target.item_text
            if text is None:
                text = await conn.fetchval(
                    _PENDING_TEXT,
                    target.source.topic,
                    target.source.partition,
                    target.source.offset,
                )
            item = await conn.fetchrow(
                _OPEN_ITEM,
                target.sent_at,
                target.message_id,
                target.group_id,
                target.sender_id,
                text or "",
                target.category,
                target.priority,
                target.automatic_decision,
                target.reasons,
                target.tenant,
            )
            assert item is not None
            appeal = await conn.fetchrow(
                _INSERT_APPEAL,
                request.appeal_id,
                channel,
                filed_by,
                request.appellant_id,
                request.statement,
                target.source.topic,
                target.source.partition,
                target.source.offset,
                target.sent_at,
                target.message_id,
                target.group_id,
                target.sender_id,
                target.category,
                target.decision,
                target.decided_by,
                target.moderator,
                target.decision_id,
                target.item_id,
                item["id"],
                item["created_at"],
                float(self._settings.appeals_target_s),
                target.tenant,
            )
            assert appeal is not None
            details = {
                "role": "platform",
                "channel": channel,
                "appeal_id": appeal["public_id"],
                "appeal_key": request.appeal_id,
                "original_decided_by": target.decided_by,
                "original_decision_id": optional_text(target.decision_id),
            }
            await conn.execute(
                _INSERT_EVENT, item["id"], filed_by, "appeal_filed", encode_payload(details)
            )
            if target.item_id is not None:
                await conn.execute(
                    _INSERT_EVENT,
                    target.item_id,
                    filed_by,
                    "appealed",
                    encode_payload({"role": "platform", "appeal_id": appeal["public_id"]}),
                )
        _log.info(
            "appeal_filed",
            appeal_id=appeal["public_id"],
            channel=channel,
            original_decided_by=target.decided_by,
        )
        return AppealFiled(
            appeal_id=appeal["public_id"],
            appeal_key=request.appeal_id,
            item_id=item["public_id"],
            status=AppealStatus.OPEN,
            filed_at=appeal["filed_at"],
            due_at=appeal["due_at"],
            created=True,
        )

    def _replay(self, request: AppealRequest, row: Any) -> AppealFiled:
        same = (
            request.decision_id is not None and row["original_decision_id"] == request.decision_id
        ) or (
            request.source is not None
            and (row["source_topic"], row["source_partition"], row["source_offset"])
            == (request.source.topic, request.source.partition, request.source.offset)
        )
        if not same:
            raise InvalidAppealError(
                f"appeal_id {request.appeal_id[:128]!r} already names an appeal of another decision"
            )
        return AppealFiled(
            appeal_id=str(row["public_id"]),
            appeal_key=row["appeal_key"],
            item_id=row["item_public_id"],
            status=AppealStatus(row["status"]),
            filed_at=row["filed_at"],
            due_at=row["due_at"],
            created=False,
        )

    async def _target(self, conn: Conn, request: AppealRequest) -> _Target:
        if request.decision_id is not None:
            found = await conn.fetchrow(_DECISION_BY_ID, str(request.decision_id))
            if found is None:
                raise AppealTargetNotFoundError(f"no moderator decision {request.decision_id}")
            item = await conn.fetchrow(
                "SELECT id, status, queue, resolution, resolved_by, message_text, category, "
                "priority, auto_decision, reasons, sent_at, message_id, group_id, sender_id, "
                "source_topic, source_partition, source_offset, tenant FROM review_items "
                "WHERE id = $1",
                found["review_item_id"],
            )
            assert item is not None
            return self._decided(item, request.decision_id, found["actor"], found["action"])
        source = request.source
        assert source is not None
        item = await conn.fetchrow(_ITEM_AT, source.topic, source.partition, source.offset)
        if item is not None and item["queue"] == APPEALS_QUEUE:
            raise NotAppealableError("an appeal's own outcome cannot be appealed")
        if item is not None and item["status"] == "resolved":
            decision = await conn.fetchrow(_DECISION_ON_ITEM, item["id"])
            if decision is None:
                raise NotAppealableError(f"message {item['message_id'][:128]!r}: no decision")
            return self._decided(
                item, decision["decision_id"], decision["actor"], decision["action"]
            )
        if item is not None and item["status"] in ("open", "claimed"):
            raise NotAppealableError(
                f"message {item['message_id'][:128]!r} is still waiting for a moderator: "
                "appeal the decision once it is made"
            )
        verdict = await conn.fetchrow(_VERDICT_AT, source.topic, source.partition, source.offset)
        if verdict is None:
            raise AppealTargetNotFoundError(
                f"no verdict at {source.topic[:249]}/{source.partition}/{source.offset}"
            )
        if verdict["decision"] not in _AGAINST_THE_MESSAGE:
            raise NotAppealableError(
                f"message {verdict['message_id'][:128]!r} was allowed: nothing to appeal"
            )
        return _Target(
            source=source,
            sent_at=verdict["sent_at"],
            message_id=verdict["message_id"],
            group_id=verdict["group_id"],
            sender_id=verdict["sender_id"],
            category=verdict["category"],
            priority=float(verdict["priority"]),
            reasons=list(verdict["reasons"]),
            automatic_decision=verdict["decision"],
            decision=verdict["decision"],
            decided_by=verdict["decided_by"],
            moderator=None,
            decision_id=None,
            item_id=None if item is None else item["id"],
            item_text=None if item is None else (item["message_text"] or None),
            tenant=verdict["tenant"],
        )

    @staticmethod
    def _decided(item: Any, decision_id: uuid.UUID, moderator: str, action: str) -> _Target:
        if item["queue"] == APPEALS_QUEUE:
            raise NotAppealableError("an appeal's own outcome cannot be appealed")
        if item["status"] != "resolved":
            raise NotAppealableError(f"decision {decision_id} no longer stands")
        if action == Action.APPROVE.value:
            raise NotAppealableError(
                f"decision {decision_id} approved the message: nothing to appeal"
            )
        return _Target(
            source=AppealSource(
                topic=item["source_topic"],
                partition=item["source_partition"],
                offset=item["source_offset"],
            ),
            sent_at=item["sent_at"],
            message_id=item["message_id"],
            group_id=item["group_id"],
            sender_id=item["sender_id"],
            category=item["category"],
            priority=float(item["priority"]),
            reasons=list(item["reasons"]),
            automatic_decision=item["auto_decision"],
            decision=action,
            decided_by="moderator",
            moderator=moderator,
            decision_id=decision_id,
            item_id=item["id"],
            item_text=item["message_text"] or None,
            tenant=item["tenant"],
        )

    async def get(self, ref: str, tenants: Sequence[str] | None = None) -> AppealView:
        """One appeal by its public id (``appeal_not_found`` otherwise, and for an appeal of a
        tenant outside ``tenants``; ``None``: every tenant)."""
        row = await self._pool.fetchrow(SELECT_APPEAL + "WHERE a.public_id = $1", _public_id(ref))
        if row is None or (tenants is not None and row["tenant"] not in tenants):
            raise AppealNotFoundError(f"appeal {ref[:64]!r} does not exist")
        return appeal_view(row)


def _public_id(ref: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(ref)
    except ValueError:
        return None
