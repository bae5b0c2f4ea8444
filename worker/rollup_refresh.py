"""The analysts' rollups, kept fresh by the worker: one refresh every ``refresh_interval_s``.

Every worker replica runs this loop; the refresh takes a database lock, so one replica counts
each interval's verdicts and the others find the work done (``common.rollups``). It never stops
the worker: an outage or a database without the rollup migration is logged and tried again at
the next interval; the verdicts wait in PostgreSQL and are counted once it succeeds.

Each completed refresh sets ``modstream_rollups_refreshed_timestamp_seconds`` to the time it
finished (a refresh that found another replica at work sets nothing), so the most recent value
over the replicas is when the rollups were last brought up to date: an alert watches its age.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from common.logs import get_logger
from common.rollups import refresh_rollups
from engine.metrics import Metrics
from engine.stores.database import STORE_DRIVER_ERRORS, Database, StoreError, store_failure

__all__ = ["RollupRefresher"]

_log = get_logger(__name__)


class RollupRefresher:
    """Refreshes the rollups at start and every ``interval_s`` until ``done``; ``metrics``
    gets the wall-clock time (``wall_clock``) of each completed refresh."""

    def __init__(
        self,
        database: Database,
        *,
        interval_s: float,
        page_rows: int,
        metrics: Metrics | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._database = database
        self._interval_s = interval_s
        self._page_rows = page_rows
        self._metrics = metrics
        self._wall_clock = wall_clock

    async def refresh_once(self) -> int | None:
        """One refresh: rows and changes counted, ``None`` when another replica was at it.
        Raises ``StoreError`` (``StoreUnavailable`` for an outage)."""
        try:
            async with self._database.pool().acquire() as conn:
                return await refresh_rollups(conn, self._page_rows)
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "rollup refresh") from exc

    async def run(self, done: asyncio.Event) -> None:
        """Refresh until ``done``; failures are logged, never raised."""
        while not done.is_set():
            started = time.perf_counter()
            try:
                counted = await self.refresh_once()
            except StoreError as exc:
                _log.warning("rollup_refresh_failed", error=str(exc))
            else:
                if counted is not None and self._metrics is not None:
                    self._metrics.rollups_refreshed_timestamp_seconds.set(self._wall_clock())
                if counted:
                    _log.info(
                        "rollups_refreshed",
                        counted=counted,
                        seconds=round(time.perf_counter() - started, 3),
                    )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._interval_s)
