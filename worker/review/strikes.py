"""Per-sender strikes: what each decision costs a sender, and the live totals the rules read.

A decision that finds a violation gives the sender a strike of the action's weight; each strike
counts until its ``expires_at`` (decided + ``review.strike_decay_days``). Totals span every group,
so a sender who offends in one group is a repeat offender everywhere. The worker can call
:func:`active_strikes` for a batch's senders and put the total in ``metadata["sender_strikes"]``
for the user-profile rules (repeat offenders escalate sooner).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from worker.review.models import Action

__all__ = ["STRIKE_WEIGHTS", "active_strikes"]

STRIKE_WEIGHTS: dict[Action, int] = {
    Action.APPROVE: 0,
    Action.ESCALATE_TO_ADMIN: 0,
    Action.REMOVE_MESSAGE: 1,
    Action.WARN: 1,
    Action.MUTE: 2,
    Action.BAN: 3,
}


async def active_strikes(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], sender_ids: Sequence[str]
) -> dict[str, int]:
    """Live strike totals for ``sender_ids``; senders without strikes map to 0."""
    totals = dict.fromkeys(sender_ids, 0)
    if not totals:
        return totals
    rows = await conn.fetch(
        "SELECT sender_id, sum(weight)::integer AS total FROM sender_strikes "
        "WHERE sender_id = ANY($1::text[]) AND expires_at > now() GROUP BY sender_id",
        list(totals),
    )
    for row in rows:
        totals[row["sender_id"]] = row["total"]
    return totals
