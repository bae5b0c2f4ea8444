"""worker.rollup_refresh: the rollup job's loop never stops the worker and stops at ``done``;
each completed refresh, and only that, stamps ``modstream_rollups_refreshed_timestamp_seconds``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from engine.metrics import Metrics
from engine.stores.database import StoreUnavailable
from worker.rollup_refresh import RollupRefresher


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


class _Connection:
    """Answers the refresh function with the next of ``answers`` (a count, ``None`` while
    another replica holds the job's lock, or an exception to raise)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.asked = asyncio.Event()

    @contextlib.asynccontextmanager
    async def transaction(self, **_: Any) -> AsyncIterator[None]:
        yield

    async def fetchval(self, query: str, *args: Any) -> Any:
        self.asked.set()
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class _Database:
    def __init__(self, answers: list[Any]) -> None:
        self.connection = _Connection(answers)

    def pool(self) -> Any:
        database = self

        class _Pool:
            @contextlib.asynccontextmanager
            async def acquire(self) -> AsyncIterator[_Connection]:
                yield database.connection

        return _Pool()


async def test_only_a_completed_refresh_stamps_the_freshness_gauge() -> None:
    """A refresh that counted rows (even none) sets the gauge to the wall-clock time it ended;
    one that found another replica at work, or one PostgreSQL refused, leaves it as it was."""
    metrics = Metrics()
    times = iter([1_000.0, 2_000.0, 3_000.0, 4_000.0])
    database = _Database([5, None, asyncpg.SerializationError("concurrent"), 0])
    refresher = RollupRefresher(
        database,  # type: ignore[arg-type]
        interval_s=1.0,
        page_rows=10,
        metrics=metrics,
        wall_clock=lambda: next(times),
    )
    gauge = "modstream_rollups_refreshed_timestamp_seconds"
    assert metrics.registry.get_sample_value(gauge) == 0
    seen: list[float | None] = []
    for _ in range(4):  # one refresh per run: it then waits for the interval, cut by done
        done = asyncio.Event()
        task = asyncio.create_task(refresher.run(done))
        await asyncio.wait_for(database.connection.asked.wait(), 1.0)
        database.connection.asked.clear()
        done.set()
        await asyncio.wait_for(task, 1.0)
        seen.append(metrics.registry.get_sample_value(gauge))
    assert seen == [1_000.0, 1_000.0, 1_000.0, 2_000.0]
