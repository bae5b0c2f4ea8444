"""``modstream retention``: verdict history, message text and the ledgers, each for its period.

- Verdicts (``--keep``, default 90 days): a monthly partition ``verdicts_YYYY_MM`` is dropped
  whole once its entire month lies before the cutoff, which is instant and leaves no bloat; rows
  older than the cutoff in ``verdicts_default`` are deleted. Partitions for the current and the
  next ``--ahead-months`` months are created (``modstream_ensure_verdict_partitions``).
- Message text (``--keep-text``, default 30 days): resolved escalations decided before the cutoff
  keep their row (the analysts' figures need it) but lose ``message_text`` (set to ``''``,
  ``text_cleared_at`` stamped); texts waiting in ``pending_texts`` longer than that are deleted
  (their verdicts stay ``pending_model`` and are no longer re-scored).
- Analysts' rollups (``--keep-rollups``, default 400 days, never shorter than ``--keep``): their
  hours and days before the cutoff, and the rule-reach rows whose latest hit is that old. They
  outlive the raw verdicts on purpose: a year of figures costs a few hundred megabytes.
- Ledgers: dead letters after ``--keep-dead-letters`` (90 days), strikes that expired more than
  ``--keep-expired-strikes`` ago (30 days; expired strikes no longer count anyway), published
  decision-outbox rows after ``--keep-outbox`` (7 days; unpublished ones are never touched),
  console sessions once expired, and the online service's message-id ledger after ``--keep``.

Everything runs in one transaction under an advisory lock, so two runs cannot interleave;
``--dry-run`` counts what would go and changes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from admin.errors import AdminError
from common.logs import configure_logging, get_logger
from common.settings import ServiceSettings

__all__ = [
    "RetentionError",
    "RetentionPeriods",
    "RetentionReport",
    "apply_retention",
    "parse_keep",
    "partitions_to_drop",
    "register",
]

_ADVISORY_LOCK_KEY = 0x72657465  # "rete"
_KEEP_PATTERN = re.compile(r"^(?P<count>\d+)(?P<unit>[dw])$")
_PARTITION_PATTERN = re.compile(r"^verdicts_(?P<year>\d{4})_(?P<month>\d{2})$")
_KEEP_ROLLUPS = timedelta(days=400)
_log = get_logger(__name__)


class RetentionError(AdminError, ValueError):
    """A retention argument that cannot be honoured."""


@dataclass(frozen=True, slots=True)
class RetentionPeriods:
    """How long each kind of data is kept (``modstream retention`` flags)."""

    verdicts: timedelta = timedelta(days=90)
    text: timedelta = timedelta(days=30)
    dead_letters: timedelta = timedelta(days=90)
    expired_strikes: timedelta = timedelta(days=30)
    outbox: timedelta = timedelta(days=7)
    rollups: timedelta = _KEEP_ROLLUPS


@dataclass(frozen=True, slots=True)
class RetentionReport:
    cutoff: datetime
    dropped: tuple[str, ...]
    default_rows_deleted: int
    partitions_created: int
    dry_run: bool
    ledgers: dict[str, int] = field(default_factory=dict)
    """Rows cleared or deleted per step (``review_texts_cleared``, ``dead_letters`` ...)."""


@dataclass(frozen=True, slots=True)
class _Step:
    """One pruning step over fixed SQL; ``$1`` in ``condition`` is the step's cutoff."""

    name: str
    table: str
    condition: str
    period: str
    """A ``RetentionPeriods`` field, or ``"now"`` for rows whose own expiry has passed."""
    assignments: str | None = None
    """``SET`` clause: the step clears columns instead of deleting rows."""

    def statement(self) -> str:
        if self.assignments is not None:
            return f"UPDATE {self.table} SET {self.assignments} WHERE {self.condition}"  # noqa: S608 (constants)
        return f"DELETE FROM {self.table} WHERE {self.condition}"  # noqa: S608 (constants)

    def count(self) -> str:
        return f"SELECT count(*) FROM {self.table} WHERE {self.condition}"  # noqa: S608 (constants)


_BEFORE_DAY = "{column} < ($1 AT TIME ZONE 'UTC')::date"
"""A UTC day that began before the cutoff's day (whole days only)."""

_LEDGER_STEPS: tuple[_Step, ...] = (
    _Step(
        "review_texts_cleared",
        "review_items",
        "status = 'resolved' AND text_cleared_at IS NULL AND resolved_at < $1",
        "text",
        assignments="message_text = '', text_cleared_at = now()",
    ),
    # Items a rescan closed (no person decided them) keep their text as long as resolved ones.
    _Step(
        "closed_review_texts_cleared",
        "review_items",
        "status = 'closed' AND text_cleared_at IS NULL AND closed_at < $1",
        "text",
        assignments="message_text = '', text_cleared_at = now()",
    ),
    # An appellant's statement goes like a message text, once the appeal is decided.
    _Step(
        "appeal_statements_cleared",
        "appeals",
        "status <> 'open' AND statement_cleared_at IS NULL AND decided_at < $1",
        "text",
        assignments="statement = '', statement_cleared_at = now()",
    ),
    _Step("pending_texts", "pending_texts", "created_at < $1", "text"),
    _Step("dead_letters", "dead_letters", "created_at < $1", "dead_letters"),
    _Step("expired_strikes", "sender_strikes", "expires_at < $1", "expired_strikes"),
    _Step(
        "published_decisions",
        "review_decision_outbox",
        "published_at IS NOT NULL AND published_at < $1",
        "outbox",
    ),
    _Step("expired_sessions", "review_sessions", "expires_at < $1", "now"),
    # The online service's message-id ledger goes with the verdicts it points at.
    _Step("online_messages", "online_messages", "created_at < $1", "verdicts"),
    *(
        _Step(table, table, condition, "rollups")
        for table, condition in (
            ("rollup_verdicts_hourly", "hour < $1"),
            ("rollup_verdicts_daily", _BEFORE_DAY.format(column="day")),
            ("rollup_verdict_totals_hourly", "hour < $1"),
            ("rollup_latency_hourly", "hour < $1"),
            ("rollup_rule_hits_hourly", "hour < $1"),
            ("rollup_rule_groups", _BEFORE_DAY.format(column="last_day")),
            ("rollup_rule_senders", _BEFORE_DAY.format(column="last_day")),
            ("rollup_sender_flags_daily", _BEFORE_DAY.format(column="day")),
            ("rollup_severe_harm_daily", _BEFORE_DAY.format(column="day")),
            ("rollup_model_agreement_hourly", "hour < $1"),
            ("rollup_review_latency_hourly", "hour < $1"),
        )
    ),
    # The shadow model's verdicts go with the live verdicts they shadow.
    _Step("shadow_verdicts", "shadow_verdicts", "sent_at < $1", "verdicts"),
)


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
    periods: RetentionPeriods | None = None,
) -> RetentionReport:
    """Drop verdicts older than ``keep``, clear old text, prune the ledgers, create partitions."""
    if ahead_months < 0:
        raise RetentionError("--ahead-months must not be negative")
    at = now or datetime.now(UTC)
    chosen = periods or RetentionPeriods(verdicts=keep, rollups=max(keep, _KEEP_ROLLUPS))
    if chosen.rollups < chosen.verdicts:
        # A verdict re-scored after its rollup rows went would be subtracted from nothing.
        raise RetentionError("--keep-rollups must not be shorter than --keep")
    cutoff = at - keep
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
        ledgers = await _prune_ledgers(conn, chosen, at, dry_run)
    return RetentionReport(cutoff, tuple(doomed), deleted, created, dry_run, ledgers)


async def _prune_ledgers(
    conn: asyncpg.Connection[Any], periods: RetentionPeriods, at: datetime, dry_run: bool
) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in _LEDGER_STEPS:
        step_cutoff = at if step.period == "now" else at - getattr(periods, step.period)
        if dry_run:
            counts[step.name] = int(await conn.fetchval(step.count(), step_cutoff))
            continue
        status = await conn.execute(step.statement(), step_cutoff)
        counts[step.name] = int(status.split()[-1])
        if counts[step.name]:
            _log.info("retention_pruned", step=step.name, rows=counts[step.name])
    return counts


async def _main(
    settings: ServiceSettings, periods: RetentionPeriods, ahead: int, dry_run: bool
) -> RetentionReport:
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        return await apply_retention(
            conn, periods.verdicts, ahead_months=ahead, dry_run=dry_run, periods=periods
        )
    finally:
        await conn.close()


def _run(args: argparse.Namespace) -> int:
    settings = ServiceSettings()
    configure_logging(settings.log_level)
    try:
        periods = RetentionPeriods(
            verdicts=parse_keep(args.keep),
            text=parse_keep(args.keep_text),
            dead_letters=parse_keep(args.keep_dead_letters),
            expired_strikes=parse_keep(args.keep_expired_strikes),
            outbox=parse_keep(args.keep_outbox),
            rollups=parse_keep(args.keep_rollups),
        )
        report = asyncio.run(_main(settings, periods, args.ahead_months, args.dry_run))
    except RetentionError as exc:
        print(f"error: {exc}")
        return 2
    verb = "would drop" if report.dry_run else "dropped"
    print(
        f"cutoff {report.cutoff.isoformat()}: {verb} {len(report.dropped)} partition(s)"
        + (f" ({', '.join(report.dropped)})" if report.dropped else "")
        + f", deleted {report.default_rows_deleted} default-partition row(s), "
        f"created {report.partitions_created} partition(s); "
        + ", ".join(f"{name}={rows}" for name, rows in report.ledgers.items())
    )
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "retention",
        help="drop old verdict partitions, clear old message text, prune the ledgers",
    )
    parser.add_argument("--keep", default="90d", help="how much verdict history to keep: 90d, 12w")
    parser.add_argument(
        "--keep-text", default="30d", help="message text of resolved escalations and pending texts"
    )
    parser.add_argument("--keep-dead-letters", default="90d", help="dead-letter ledger rows")
    parser.add_argument(
        "--keep-expired-strikes", default="30d", help="strikes this long past their expiry"
    )
    parser.add_argument("--keep-outbox", default="7d", help="published decision-outbox rows")
    parser.add_argument(
        "--keep-rollups", default="400d", help="analysts' rollups (at least --keep)"
    )
    parser.add_argument(
        "--ahead-months", type=int, default=3, help="upcoming monthly partitions to create"
    )
    parser.add_argument("--dry-run", action="store_true", help="report, change nothing")
    parser.set_defaults(handler=_run)
