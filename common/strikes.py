"""Live strike totals per sender: the one read of ``sender_strikes`` both services share.

The review service writes strikes when a moderator's decision finds a violation (weights in
``review.strikes``); the daemon reads the totals for a fetch's senders so the repeat-offender
rule sees them. A strike counts until its ``expires_at``; totals span every group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

__all__ = ["active_strikes"]


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
