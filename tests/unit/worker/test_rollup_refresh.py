"""worker.rollup_refresh: the rollup job's loop never stops the worker and stops at ``done``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from worker.rollup_refresh import RollupRefresher
from worker.stores.database import StoreUnavailable


class _AwayDatabase:
    """A database that is never reachable; counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def pool(self) -> Any:
        self.asked += 1
        raise StoreUnavailable("database not started")


async def test_an_outage_is_logged_and_retried_until_done() -> None:
    """Each interval tries again after an outage; ``done`` ends the loop without raising."""
    database = _AwayDatabase()
    refresher = RollupRefresher(database, interval_s=0.01, page_rows=10)  # type: ignore[arg-type]
    done = asyncio.Event()
    task = asyncio.create_task(refresher.run(done))
    await asyncio.sleep(0.1)
    done.set()
    await asyncio.wait_for(task, 1.0)
    assert database.asked >= 3


async def test_refresh_once_reports_an_outage_as_store_unavailable() -> None:
    """A single refresh raises the store's own error type, never the driver's."""
    refresher = RollupRefresher(_AwayDatabase(), interval_s=1, page_rows=10)  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable):
        await refresher.refresh_once()
