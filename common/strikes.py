"""Live strike totals per sender: the one read of ``sender_strikes`` both services share.

The review service writes strikes when a moderator's decision finds a violation (weights in
``review.strikes``); the daemon reads the totals for a fetch's senders so the repeat-offender
rule sees them. A strike counts until its ``expires_at``; totals span every group. A rescan
reads the totals as they stood when each message was sent (:func:`strikes_as_of`: the strikes
given before then and not yet expired then), as far as the history kept allows (``modstream
retention`` deletes strikes some time after they expire).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

__all__ = ["active_strikes", "strikes_as_of"]


async def active_strikes(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    sender_ids: Sequence[str],
    tenants: Sequence[str] | None = None,
) -> dict[str, int]:
    """Live strike totals for ``sender_ids``; senders without strikes map to 0. ``tenants``:
    only strikes given in those tenants count (``None``: every tenant's)."""
    totals = dict.fromkeys(sender_ids, 0)
    if not totals:
        return totals
    rows = await conn.fetch(
        "SELECT sender_id, sum(weight)::integer AS total FROM sender_strikes "
        "WHERE sender_id = ANY($1::text[]) AND expires_at > now() "
        "AND ($2::text[] IS NULL OR tenant = ANY($2::text[])) GROUP BY sender_id",
        list(totals),
        None if tenants is None else list(tenants),
    )
    for row in rows:
        totals[row["sender_id"]] = row["total"]
    return totals


_AS_OF = """
SELECT x.n, COALESCE(sum(s.weight), 0)::integer AS total
FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS x(sender_id, at, n)
LEFT JOIN sender_strikes s
       ON s.sender_id = x.sender_id AND s.created_at <= x.at AND s.expires_at > x.at
GROUP BY x.n
"""


async def strikes_as_of(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], moments: Sequence[tuple[str, datetime]]
) -> list[int]:
    """Each ``(sender_id, at)``'s strike total at ``at``, in order: strikes given at or before
    ``at`` that had not expired by then."""
    if not moments:
        return []
    rows = await conn.fetch(_AS_OF, [s for s, _ in moments], [at for _, at in moments])
    totals = {int(r["n"]): int(r["total"]) for r in rows}
    return [totals.get(n, 0) for n in range(1, len(moments) + 1)]
