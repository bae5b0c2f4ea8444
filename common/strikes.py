"""Live strike totals per sender: the one read of ``sender_strikes`` both services share.

The review service writes strikes when a moderator's decision finds a violation (weights in
``review.strikes``); the daemon reads the totals for a fetch's senders so the repeat-offender
rule sees them. A strike counts until its ``expires_at``; totals span every group of the
sender's tenant (:func:`tenant_strikes`: a sender id names a sender within its tenant). A rescan
reads the totals as they stood when each message was sent (:func:`strikes_as_of`: the strikes
given before then and not yet expired then), as far as the history kept allows (``modstream
retention`` deletes strikes some time after they expire).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

__all__ = ["active_strikes", "strikes_as_of", "tenant_strikes"]


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


_BY_TENANT = """
SELECT x.n, COALESCE(sum(s.weight), 0)::integer AS total
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(tenant, sender_id, n)
LEFT JOIN sender_strikes s
       ON s.sender_id = x.sender_id AND s.tenant = x.tenant AND s.expires_at > now()
GROUP BY x.n
"""


async def tenant_strikes(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], senders: Sequence[tuple[str, str]]
) -> list[int]:
    """Each ``(tenant, sender_id)``'s live strike total, in order: the strikes given in that
    tenant only."""
    if not senders:
        return []
    rows = await conn.fetch(_BY_TENANT, [t for t, _ in senders], [s for _, s in senders])
    totals = {int(r["n"]): int(r["total"]) for r in rows}
    return [totals.get(n, 0) for n in range(1, len(senders) + 1)]


_AS_OF = """
SELECT x.n, COALESCE(sum(s.weight), 0)::integer AS total
FROM unnest($1::text[], $2::timestamptz[], $3::text[])
     WITH ORDINALITY AS x(sender_id, at, tenant, n)
LEFT JOIN sender_strikes s
       ON s.sender_id = x.sender_id AND s.created_at <= x.at AND s.expires_at > x.at
      AND (x.tenant IS NULL OR s.tenant = x.tenant)
GROUP BY x.n
"""


async def strikes_as_of(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    moments: Sequence[tuple[str, datetime]],
    tenants: Sequence[str] | None = None,
) -> list[int]:
    """Each ``(sender_id, at)``'s strike total at ``at``, in order: strikes given at or before
    ``at`` that had not expired by then, in the moment's tenant (``tenants``, one per moment;
    ``None``: every tenant's)."""
    if not moments:
        return []
    per_moment = list(tenants) if tenants is not None else [None] * len(moments)
    if len(per_moment) != len(moments):
        raise ValueError("one tenant per moment")
    rows = await conn.fetch(_AS_OF, [s for s, _ in moments], [at for _, at in moments], per_moment)
    totals = {int(r["n"]): int(r["total"]) for r in rows}
    return [totals.get(n, 0) for n in range(1, len(moments) + 1)]
