"""``modstream rollups``: run the analysts' rollup job by hand or from a scheduler, and see how
fresh the rollups are.

- ``modstream rollups refresh``: one refresh (``common.rollups``); with ``--every 30`` it repeats
  every 30 s until interrupted (a deployment that sets ``MODSTREAM_ROLLUPS__REFRESH_INTERVAL_S=0``
  on its workers runs this instead, as a cron job or its own process). The first refresh after
  ``modstream migrate`` counts every verdict already stored, in pages of ``--page-rows``.
- ``modstream rollups status``: what ``analytics_rollup_freshness`` says.

Both connect with ``MODSTREAM_POSTGRES__DSN``: the owner's login or a worker's (the worker role
may run the job, nothing else of the rollups).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import asyncpg

from common.logs import configure_logging, get_logger
from common.rollups import DEFAULT_PAGE_ROWS, refresh_rollups, rollup_freshness
from common.settings import ServiceSettings

__all__ = ["register"]

_log = get_logger(__name__)


async def _refresh(dsn: str, page_rows: int, every_s: float | None) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        while True:
            started = time.perf_counter()
            counted = await refresh_rollups(conn, page_rows)
            seconds = time.perf_counter() - started
            if counted is None:
                print("another refresh is running; nothing done")
            else:
                print(f"counted {counted} verdict rows and changes in {seconds:.1f} s")
            if every_s is None:
                return
            await asyncio.sleep(every_s)
    finally:
        await conn.close()


async def _status(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        state = await rollup_freshness(conn)
    finally:
        await conn.close()
    if state.covered_until is None:
        print("rollups: never refreshed (run `modstream rollups refresh` or a worker)")
        return
    print(
        f"rollups cover every verdict committed before {state.covered_until.isoformat()} "
        f"(lag {state.lag_s:.0f} s); last refresh {state.refreshed_at} counted "
        f"{state.last_rows} rows and {state.last_changes} changes in "
        f"{state.last_duration_s:.2f} s"
    )


def _run(args: argparse.Namespace) -> int:
    settings = ServiceSettings()
    configure_logging(settings.log_level)
    dsn = settings.postgres.dsn.get_secret_value()
    try:
        if args.action == "refresh":
            if args.page_rows < 1 or (args.every is not None and args.every <= 0):
                print("error: --page-rows and --every must be positive")
                return 2
            asyncio.run(_refresh(dsn, args.page_rows, args.every))
        else:
            asyncio.run(_status(dsn))
    except KeyboardInterrupt:
        return 0
    except (OSError, asyncpg.PostgresError) as exc:
        _log.error("rollups_command_failed", error_type=type(exc).__name__)
        print(f"error: {type(exc).__name__} (is the database migrated and reachable?)")
        return 1
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rollups", help="refresh the analysts' rollups, or show how fresh they are"
    )
    parser.add_argument("action", choices=("refresh", "status"))
    parser.add_argument(
        "--page-rows",
        type=int,
        default=DEFAULT_PAGE_ROWS,
        help="verdict rows counted per step (memory)",
    )
    parser.add_argument(
        "--every", type=float, default=None, help="refresh: repeat every this many seconds"
    )
    parser.set_defaults(handler=_run)
