"""``python -m bench.analytics [--rows N]``: every documented analyst query at platform scale.

1. A scratch database on the stack's PostgreSQL (``bench.scratch_db``: created, migrated, and
   dropped at the end whatever happens), after checking the disk has room for it.
2. ``--rows`` verdicts (default 20,000,000) of the history ``bench.analytics_data`` describes,
   loaded with ``COPY`` one hour per statement (each its own transaction, so ``rollup_xid`` is
   filled by its default as the worker's inserts fill it), then their review items and events;
   ``ANALYZE`` (what autovacuum would have done by then).
3. The rollups built as the product builds them: one ``modstream_rollups_refresh`` (what a
   worker or ``modstream rollups refresh`` runs), which counts every row past the job's snapshot
   (all of them: the first refresh), then a second one (the steady state: nothing new); then
   ``VACUUM (ANALYZE)`` of the rollup tables (what autovacuum does after that many inserts).
4. Every query under "Example queries" in docs/analysts.md, as the analyst login
   (``modstream_analyst_login``), ``--runs`` times each; its time is the median. The drill-down
   (raw rows, bounded by time) is timed again after the block-range index on ``sent_at`` is
   dropped: what it costs without it.

Last line: ``rows= slowest_query_s= total_query_s= rollup_build_s=`` (the query times are the
medians; ``rollup_build_s`` is the first refresh).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from bench.analytics_data import (
    EVENT_COLUMNS,
    REVIEW_ITEM_COLUMNS,
    VERDICT_COLUMNS,
    HistorySpec,
    ReviewItemSeed,
    review_event_rows,
    review_item_rows,
    verdict_hours,
)
from bench.scratch_db import dsn_for, scratch_database
from common.rollups import refresh_rollups
from common.settings import project_root
from stack.postgres import SERVICE_LOGINS
from stack.settings import StackSettings
from worker.settings import WorkerSettings

__all__ = ["example_queries", "main"]

_BYTES_PER_ROW = 900
"""Disk per verdict row with its indexes and rollups, measured at 2 million rows (with room)."""
_DOC = project_root() / "docs" / "analysts.md"
_DRILL_DOWN_TITLE = "Drill-down"


def example_queries() -> list[tuple[str, str]]:
    """(title, SQL) of each query under "## Example queries" in docs/analysts.md."""
    section = _DOC.read_text(encoding="utf-8").split("## Example queries", 1)[1]
    out = []
    for block in section.split("\n### ")[1:]:
        title, _, rest = block.partition("\n")
        sql = rest.split("```sql\n", 1)[1].split("```", 1)[0]
        out.append((title.strip(), sql))
    return out


def _check_disk(path: Path, rows: int) -> None:
    free = shutil.disk_usage(path).free
    needed = rows * _BYTES_PER_ROW + 5 * 1024**3
    print(f"disk: {free / 1024**3:.1f} GiB free at {path}, about {needed / 1024**3:.1f} GiB needed")
    if free < needed:
        raise SystemExit("bench: not enough free disk for the scratch database (see --rows)")


async def _load(conn: asyncpg.Connection[Any], spec: HistorySpec) -> list[ReviewItemSeed]:
    escalations: list[ReviewItemSeed] = []
    loaded = 0
    started = time.perf_counter()
    report_every = max(1, spec.rows // 10)
    next_report = report_every
    for hour in verdict_hours(spec):
        await conn.copy_to_table(
            "verdicts",
            source=io.BytesIO(hour.copy_text),
            columns=list(VERDICT_COLUMNS),
            format="text",
        )
        escalations.extend(hour.escalations)
        loaded += hour.rows
        if loaded >= next_report:
            rate = loaded / (time.perf_counter() - started)
            print(f"  {loaded:>11,} verdicts loaded ({rate:,.0f} rows/s)", flush=True)
            next_report += report_every
    return escalations


async def _load_reviews(
    conn: asyncpg.Connection[Any], seeds: list[ReviewItemSeed], spec: HistorySpec
) -> None:
    items, reviews = review_item_rows(seeds, spec.end, spec.seed)
    await conn.copy_to_table(
        "review_items", source=io.BytesIO(items), columns=list(REVIEW_ITEM_COLUMNS), format="text"
    )
    ids = await conn.fetchrow("SELECT min(id), max(id), count(*) FROM review_items")
    if ids is None or tuple(ids.values()) != (1, len(seeds), len(seeds)):
        raise SystemExit(f"bench: review item ids are {ids}, not 1..n")
    events = review_event_rows(seeds, reviews)
    await conn.copy_to_table(
        "review_events", source=io.BytesIO(events), columns=list(EVENT_COLUMNS), format="text"
    )


async def _timed(conn: asyncpg.Connection[Any], sql: str) -> tuple[float, int]:
    started = time.perf_counter()
    rows = await conn.fetch(sql)
    return time.perf_counter() - started, len(rows)


async def _median(conn: asyncpg.Connection[Any], sql: str, runs: int) -> tuple[float, str, int]:
    times = []
    count = 0
    for _ in range(runs):
        seconds, count = await _timed(conn, sql)
        times.append(seconds)
    return statistics.median(times), " ".join(f"{t:.3f}" for t in times), count


async def _run_queries(dsn: str, runs: int) -> list[float]:
    conn = await asyncpg.connect(dsn)
    medians = []
    try:
        for number, (title, sql) in enumerate(example_queries(), start=1):
            median, runs_text, count = await _median(conn, sql, runs)
            medians.append(median)
            print(f"query {number:2d} {median:7.3f} s  ({runs_text}; {count} rows)  {title}")
    finally:
        await conn.close()
    return medians


async def _without_brin(owner_dsn: str, analyst_dsn: str, runs: int) -> None:
    """The drill-down again once its block-range index is gone (the scratch database's)."""
    drill = [(t, sql) for t, sql in example_queries() if _DRILL_DOWN_TITLE in t]
    if not drill:
        return
    owner = await asyncpg.connect(owner_dsn)
    try:
        await owner.execute("DROP INDEX verdicts_sent_at_brin")
    finally:
        await owner.close()
    conn = await asyncpg.connect(analyst_dsn)
    try:
        median, runs_text, _ = await _median(conn, drill[0][1], runs)
    finally:
        await conn.close()
    print(f"drill-down without verdicts_sent_at_brin: {median:.3f} s ({runs_text})")


async def _sizes(conn: asyncpg.Connection[Any]) -> None:
    rows = await conn.fetch(
        "SELECT relname, pg_total_relation_size(oid) AS bytes, reltuples::bigint AS rows "
        "FROM pg_class WHERE relname LIKE 'rollup_%' AND relkind = 'r' ORDER BY 2 DESC"
    )
    total = sum(r["bytes"] for r in rows)
    parts = ", ".join(f"{r['relname']} {r['rows']:,}" for r in rows[:6])
    print(f"rollups: {total / 1024**2:.0f} MiB ({parts})")
    verdict_bytes = await conn.fetchval(
        "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
        "WHERE inhparent = 'verdicts'::regclass"
    )
    print(f"verdicts: {verdict_bytes / 1024**3:.1f} GiB with indexes")


async def main(args: argparse.Namespace) -> None:
    settings = WorkerSettings()
    stack = StackSettings()
    _check_disk(stack.state_dir if stack.state_dir.exists() else Path.cwd(), args.rows)
    spec = HistorySpec(rows=args.rows, end=datetime.now(UTC), days=args.days, seed=args.seed)
    print(
        f"rows={spec.rows} days={spec.days} groups={spec.groups} senders={spec.senders} "
        f"from {spec.start:%Y-%m-%d %H:%M} to {spec.end:%Y-%m-%d %H:%M} UTC"
    )
    admin_dsn = settings.postgres.dsn.get_secret_value()
    async with scratch_database(admin_dsn, "modstream_bench_analytics", keep=args.keep) as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("SET synchronous_commit = off")
            started = time.perf_counter()
            seeds = await _load(conn, spec)
            await _load_reviews(conn, seeds, spec)
            load_s = time.perf_counter() - started
            await conn.execute("ANALYZE")
            print(f"loaded in {load_s:.0f} s; {len(seeds):,} review items")
            started = time.perf_counter()
            counted = await refresh_rollups(conn)
            build_s = time.perf_counter() - started
            started = time.perf_counter()
            again = await refresh_rollups(conn)
            steady_s = time.perf_counter() - started
            # What autovacuum does to tables that took this many inserts: statistics, and the
            # visibility map that lets queries read a covering index alone.
            for table in await conn.fetch(
                "SELECT relname FROM pg_class WHERE relname LIKE 'rollup\\_%' AND relkind = 'r'"
            ):
                await conn.execute(f'VACUUM (ANALYZE) "{table["relname"]}"')
            print(
                f"rollups: first refresh counted {counted:,} rows in {build_s:.1f} s; "
                f"the next counted {again} in {steady_s:.2f} s"
            )
            await _sizes(conn)
        finally:
            await conn.close()
        analyst = dsn_for(dsn, user=args.analyst_login)
        medians = await _run_queries(analyst, args.runs)
        if not args.keep:
            await _without_brin(dsn, analyst, args.runs)
    print(
        f"rows={spec.rows} slowest_query_s={max(medians):.3f} "
        f"total_query_s={sum(medians):.3f} rollup_build_s={build_s:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3, help="runs of each query (median)")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--analyst-login", default=SERVICE_LOGINS["analyst"])
    parser.add_argument(
        "--keep", action="store_true", help="leave the scratch database (for EXPLAIN); drop it"
    )
    asyncio.run(main(parser.parse_args()))
