"""Deciding appeals: upheld or reversed, with a reason, by someone other than the decider.

The holder of an appeal item's claim decides it (``ReviewQueue.locked_claim``: a live claim in
the ``appeals`` queue, within the user's categories). The moderator whose decision is appealed
is refused (``own_decision``) here, when claiming, and by the ``appeals`` table's CHECK.

One transaction records the outcome: the appeal item is resolved (``resolution`` ``upheld`` or
``reversed``), the appeal gets its status, reason, decider and time, an audit event goes on the
appeal's item and another on the appealed item, a reversal lifts the strikes the appealed
decision gave (their ``expires_at`` moves to now, ``lifted_at``/``lifted_by_appeal`` say why),
and the correction is written to the decision outbox, so it reaches ``moderation.decisions``
exactly like a decision (at least once; its ``decision_id`` is the correction's id).

The correction record (``type`` ``appeal_outcome``, ``correction`` true) carries ``action``
``appeal_upheld`` or ``appeal_reversed``, the outcome and reason, the appeal, and ``corrects``:
the appealed decision (its ``decision_id`` when a moderator made it, how it was decided, the
verdict's source coordinates). No message text and no statement.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from common.logs import get_logger
from review.appeal_records import SELECT_APPEAL, optional_text
from review.decisions import encode_payload
from review.errors import InvalidDecisionError, OwnDecisionError
from review.queue import ReviewQueue
from review.schemas import (
    APPEALS_QUEUE,
    AppealDecisionResult,
    AppealOutcome,
    User,
)

__all__ = ["CORRECTION_TYPE", "AppealOutcomes"]

_log = get_logger(__name__)

CORRECTION_TYPE = "appeal_outcome"
"""The ``type`` of a correction record on ``moderation.decisions``."""

_LIFT_STRIKES = """
WITH lifted AS (
    UPDATE sender_strikes
    SET expires_at = now(), lifted_at = now(), lifted_by_appeal = $2
    WHERE review_item_id = $1 AND lifted_at IS NULL AND expires_at > now()
    RETURNING weight)
SELECT COALESCE(sum(weight), 0)::integer FROM lifted
"""

_RECORD_OUTCOME = """
UPDATE appeals SET status = $2, outcome_reason = $3, decided_by = $4, decided_at = $5,
                   correction_id = $6::uuid, strikes_lifted = $7
WHERE id = $1
"""


class AppealOutcomes:
    """Records appeal outcomes through the queue's claims, audit trail and decision outbox."""

    def __init__(self, pool: asyncpg.Pool[Any], queue: ReviewQueue) -> None:
        self._pool = pool
        self._queue = queue

    async def decide(
        self, user: User, ref: str, outcome: AppealOutcome, reason: str
    ) -> AppealDecisionResult:
        """Decide the appeal item ``ref`` (module docs); ``published`` is False here, the
        caller flushes the outbox next."""
        self._queue.check_reason(reason)
        async with self._pool.acquire() as conn, conn.transaction():
            item = await self._queue.locked_claim(conn, user, ref)
            public_id = str(item["public_id"])
            if item["queue"] != APPEALS_QUEUE:
                raise InvalidDecisionError(
                    f"item {public_id} is not an appeal: decide it with an action "
                    f"(POST /api/items/{public_id}/decide)"
                )
            appeal = await conn.fetchrow(
                SELECT_APPEAL + "WHERE a.review_item_id = $1 FOR UPDATE OF a", item["id"]
            )
            assert appeal is not None, "every appeals item has its appeal"
            if appeal["original_moderator"] == user.name:
                raise OwnDecisionError(
                    "this appeal contests your own decision: another moderator must handle it"
                )
            lifted = 0
            if outcome is AppealOutcome.REVERSED and appeal["original_item_id"] is not None:
                lifted = await conn.fetchval(
                    _LIFT_STRIKES, appeal["original_item_id"], appeal["id"]
                )
            correction_id = str(uuid.uuid4())
            await conn.execute(
                "UPDATE review_items SET status = 'resolved', resolution = $2, "
                "resolved_by = $3, resolved_at = now(), claim_expires_at = NULL WHERE id = $1",
                item["id"],
                outcome.value,
                user.name,
            )
            details: dict[str, Any] = {
                "queue": APPEALS_QUEUE,
                "appeal_id": str(appeal["public_id"]),
                "correction_id": correction_id,
                "original_decision_id": optional_text(appeal["original_decision_id"]),
                "strikes_lifted": lifted,
            }
            event_id, decided_at = await self._queue.append_event(
                conn, item["id"], user, outcome.value, reason, details
            )
            if appeal["original_item_id"] is not None:
                await self._queue.append_event(
                    conn,
                    appeal["original_item_id"],
                    user,
                    f"appeal_{outcome.value}",
                    None,
                    {
                        "appeal_id": str(appeal["public_id"]),
                        "correction_id": correction_id,
                        "strikes_lifted": lifted,
                    },
                )
            await conn.execute(
                _RECORD_OUTCOME,
                appeal["id"],
                outcome.value,
                reason,
                user.name,
                decided_at,
                correction_id,
                lifted,
            )
            await conn.execute(
                "INSERT INTO review_decision_outbox "
                "(decision_id, review_event_id, message_key, payload, tenant) "
                "VALUES ($1::uuid, $2, $3, $4::jsonb, $5)",
                correction_id,
                event_id,
                appeal["group_id"],
                encode_payload(
                    _correction(appeal, item["id"], user, outcome, reason, correction_id, lifted)
                    | {"decided_at": decided_at.isoformat()}
                ),
                appeal["tenant"],
            )
        _log.info(
            "appeal_decided",
            appeal_id=str(appeal["public_id"]),
            outcome=outcome.value,
            actor=user.name,
            strikes_lifted=lifted,
        )
        return AppealDecisionResult(
            appeal_id=str(appeal["public_id"]),
            item_id=public_id,
            outcome=outcome,
            correction_id=correction_id,
            strikes_lifted=lifted,
            event_id=event_id,
            decided_at=decided_at,
            published=False,
        )


def _correction(
    appeal: asyncpg.Record,
    item_id: int,
    user: User,
    outcome: AppealOutcome,
    reason: str,
    correction_id: str,
    lifted: int,
) -> dict[str, Any]:
    """The correction record for ``moderation.decisions`` (module docs), without its time."""
    return {
        "decision_id": correction_id,
        "tenant": appeal["tenant"],
        "type": CORRECTION_TYPE,
        "correction": True,
        "review_item_id": item_id,
        "action": f"appeal_{outcome.value}",
        "outcome": outcome.value,
        "reason": reason,
        "moderator": user.name,
        "appeal_id": str(appeal["public_id"]),
        "appeal_key": appeal["appeal_key"],
        "appellant_id": appeal["appellant_id"],
        "message_id": appeal["message_id"],
        "group_id": appeal["group_id"],
        "sender_id": appeal["sender_id"],
        "category": appeal["category"],
        "strike_weight_lifted": lifted,
        "corrects": {
            "decision_id": optional_text(appeal["original_decision_id"]),
            "decided_by": appeal["original_decided_by"],
            "decision": appeal["original_decision"],
            "moderator": appeal["original_moderator"],
            "source": {
                "topic": appeal["source_topic"],
                "partition": appeal["source_partition"],
                "offset": appeal["source_offset"],
            },
        },
    }
