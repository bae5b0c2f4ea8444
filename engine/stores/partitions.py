"""The monthly partitions of ``verdicts``: created ahead of time, at worker start."""

from __future__ import annotations

from engine.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable

__all__ = ["ensure_verdict_partitions"]


async def ensure_verdict_partitions(database: Database, months_ahead: int = 3) -> None:
    """Create any missing partition from last month to ``months_ahead`` months from now."""
    try:
        await database.pool().execute(
            "SELECT modstream_ensure_verdict_partitions((now() - interval '1 month')::date, $1)",
            months_ahead + 2,
        )
    except UNAVAILABLE_ERRORS as exc:
        raise StoreUnavailable(f"partition upkeep failed: {type(exc).__name__}") from exc
