"""``modstream retention --keep 90d``: drop old monthly verdict partitions, create upcoming ones.

A monthly partition ``verdicts_YYYY_MM`` is dropped whole once its entire month lies before the
cutoff (now minus ``--keep``), which is instant and leaves no bloat; rows older than the cutoff
that sit in ``verdicts_default`` are deleted. Partitions for the current and the next
``--ahead-months`` months are created (``modstream_ensure_verdict_partitions``). Everything runs
in one transaction under an advisory lock, so two runs cannot interleave.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from common.logs import configure_logging, get_logger
from common.settings import ServiceSettings

__all__ = [
    "RetentionError",
    "RetentionReport",
    "apply_retention",
    "parse_keep",
    "partitions_to_drop",
    "register",
]

_ADVISORY_LOCK_KEY = 0x72657465  # "rete"
_KEEP_PATTERN = re.compile(r"^(?P<count>\d+)(?P<unit>[dw])$")
_PARTITION_PATTERN = re.compile(r"^verdicts_(?P<year>\d{4})_(?P<month>\d{2})$")
_log = get_logger(__name__)


class RetentionError(ValueError):
    """A retention argument that cannot be honoured."""


@dataclass(frozen=True, slots=True)
class RetentionReport:
    cutoff: datetime
    dropped: tuple[str, ...]
    default_rows_deleted: int
    partitions_created: int
    dry_run: bool


def parse_keep(text: str) -> timedelta:
    """``90d`` or ``12w`` as a duration; at least one day."""
    match = _KEEP_PATTERN.match(text.strip())
    if match is None:
        raise RetentionError(f"--keep {text!r}: expected a number of days or weeks, e.g. 90d")
    count = int(match["count"])
    keep = timedelta(days=count) if match["unit"] == "d" else timedelta(weeks=count)
    if keep < timedelta(days=1):
        raise RetentionError("--keep must be at least 1d")
    return keep


def _next_month(first: date) -> date:
    return date(first.year + first.month // 12, first.month % 12 + 1, 1)


def partitions_to_drop(names: Iterable[str], cutoff: datetime) -> list[str]:
    """Monthly partitions whose whole month ends at or before ``cutoff`` (UTC), oldest first."""
    doomed: list[tuple[date, str]] = []
    for name in names:
        match = _PARTITION_PATTERN.match(name)
        if match is None:
            continue
        first = date(int(match["year"]), int(match["month"]), 1)
        month_end = datetime.combine(_next_month(first), datetime.min.time(), tzinfo=UTC)
        if month_end <= cutoff:
            doomed.append((first, name))
    return [name for _, name in sorted(doomed)]


async def apply_retention(
    conn: asyncpg.Connection[Any],
    keep: timedelta,
    *,
    ahead_months: int = 3,
    dry_run: bool = False,
    now: datetime | None = None,
) -> RetentionReport:
    """Drop what is older than ``keep`` and create the coming months' partitions."""
    if ahead_months < 0:
        raise RetentionError("--ahead-months must not be negative")
    cutoff = (now or datetime.now(UTC)) - keep
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _ADVISORY_LOCK_KEY)
        rows = await conn.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'verdicts'::regclass"
        )
        doomed = partitions_to_drop((r["relname"] for r in rows), cutoff)
        deleted = 0
        created = 0
        if not dry_run:
            for name in doomed:
                await conn.execute(f'DROP TABLE "{name}"')
                _log.info("verdict_partition_dropped", partition=name)
            status = await conn.execute("DELETE FROM verdicts_default WHERE sent_at < $1", cutoff)
            deleted = int(status.split()[-1])
            created = await conn.fetchval(
                "SELECT modstream_ensure_verdict_partitions($1::date, $2)",
                (now or datetime.now(UTC)).date(),
                ahead_months + 1,
            )
    return RetentionReport(cutoff, tuple(doomed), deleted, created, dry_run)


async def _main(
    settings: ServiceSettings, keep: timedelta, ahead: int, dry_run: bool
) -> RetentionReport:
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        return await apply_retention(conn, keep, ahead_months=ahead, dry_run=dry_run)
    finally:
        await conn.close()


def _run(args: argparse.Namespace) -> int:
    settings = ServiceSettings()
    configure_logging(settings.log_level)
    try:
        keep = parse_keep(args.keep)
        report = asyncio.run(_main(settings, keep, args.ahead_months, args.dry_run))
    except RetentionError as exc:
        print(f"error: {exc}")
        return 2
    verb = "would drop" if report.dry_run else "dropped"
    print(
        f"cutoff {report.cutoff.isoformat()}: {verb} {len(report.dropped)} partition(s)"
        + (f" ({', '.join(report.dropped)})" if report.dropped else "")
        + f", deleted {report.default_rows_deleted} default-partition row(s), "
        f"created {report.partitions_created} partition(s)"
    )
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "retention", help="drop verdict partitions older than --keep, create upcoming ones"
    )
    parser.add_argument("--keep", default="90d", help="how much history to keep: 90d, 12w")
    parser.add_argument(
        "--ahead-months", type=int, default=3, help="upcoming monthly partitions to create"
    )
    parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
    parser.set_defaults(handler=_run)
