"""One run of the analysts' rollup job: the call the worker and ``modstream rollups`` share.

``modstream_rollups_refresh`` (``migrations/0070_rollups.sql``) counts what changed in
``verdicts`` and ``review_items`` since its last snapshot into the rollups and moves the snapshot
forward; it needs a ``REPEATABLE READ`` transaction, whose snapshot becomes the new one. Two
refreshes never count the same rows: the second waits for nothing (it gets ``None``, another one
holds the job's lock) or, if it started before the other committed, PostgreSQL refuses it with a
serialization failure, which is reported the same way. Nothing is lost either way: the rows are
counted by the next refresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

__all__ = ["DEFAULT_PAGE_ROWS", "RollupFreshness", "refresh_rollups", "rollup_freshness"]

DEFAULT_PAGE_ROWS = 20_000
"""Verdict rows counted per step of a refresh: bounds its memory on a large backlog."""


async def refresh_rollups(
    conn: asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any],
    page_rows: int = DEFAULT_PAGE_ROWS,
) -> int | None:
    """Run one refresh; the verdict rows and queued changes it counted, or ``None`` when another
    refresh was running. Driver errors (an outage, a missing migration) propagate."""
    try:
        async with conn.transaction(isolation="repeatable_read"):
            counted = await conn.fetchval("SELECT modstream_rollups_refresh($1)", page_rows)
    except asyncpg.SerializationError:
        return None
    return None if counted is None else int(counted)


@dataclass(frozen=True, slots=True)
class RollupFreshness:
    """``analytics_rollup_freshness``: every verdict committed before ``covered_until`` is in
    the rollups (``None`` until the first refresh)."""

    covered_until: datetime | None
    refreshed_at: datetime | None
    lag_s: float | None
    last_rows: int
    last_changes: int
    last_duration_s: float | None


async def rollup_freshness(conn: asyncpg.Connection[Any]) -> RollupFreshness:
    row = await conn.fetchrow(
        "SELECT covered_until, refreshed_at, lag_s, last_rows, last_changes, last_duration_s "
        "FROM analytics_rollup_freshness"
    )
    if row is None:
        raise LookupError("analytics_rollup_freshness is empty (run `modstream migrate`)")
    return RollupFreshness(**dict(row))
