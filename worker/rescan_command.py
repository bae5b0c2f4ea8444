"""``modstream rescan``: decide a window of history again with a chosen model (``worker.rescan``).

    modstream rescan --since 7d [--until 1d] [--group G] --model moderation:2 [--apply]
    modstream rescan --resume RESCAN_ID

The first line printed is ``rescan_id=…`` (what ``--resume`` takes). Progress goes to stderr:
a bar on a terminal, one JSON line a second otherwise. The report follows on stdout (counts, then
one line per category and direction with example message ids) and a last line
``rescan_id=… finished=true changed=N applied=M kept=K``. With ``--metrics-port`` the process
serves ``/metrics`` on ``http.host`` while it runs (among them ``modstream_rescan_kept_total``,
the decided verdicts it left standing), for a Prometheus to scrape a long rescan.

Exit codes: 0 finished; 2 a bad argument or an unknown rescan id; 4 stopped before the end (the
model or PostgreSQL stayed away): run again with ``--resume``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from common.logs import configure_logging, get_logger
from engine.http import HealthServer
from engine.stores.database import StoreError
from worker.cli_args import ArgumentError, parse_model_ref, parse_moment
from worker.parts import build_rescan, stored_rescan
from worker.rescan_plan import RescanNotFound, RescanRequest, RescanStopped
from worker.rescan_report import RescanReport
from worker.settings import WorkerSettings

__all__ = ["ProgressPrinter", "register"]

_log = get_logger(__name__)
_EXIT_USAGE = 2
_EXIT_STOPPED = 4
_BAR_WIDTH = 30


class ProgressPrinter:
    """Prints a rescan's progress to ``out``: a bar redrawn in place on a terminal, otherwise a
    JSON line at most every ``interval_s``."""

    def __init__(
        self,
        out: TextIO,
        *,
        interval_s: float = 1.0,
        tty: bool | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self._out = out
        self._tty = out.isatty() if tty is None else tty
        self._interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._last = float("-inf")

    def __call__(self, report: RescanReport, *, final: bool = False) -> None:
        now = self._clock()
        if not final and now - self._last < self._interval_s:
            return
        self._last = now
        elapsed = max(now - self._started, 1e-9)
        total = max(report.window, report.read, 1)
        if self._tty:
            filled = int(_BAR_WIDTH * report.read / total)
            bar = "#" * filled + "." * (_BAR_WIDTH - filled)
            self._out.write(
                f"\r[{bar}] {100 * report.read / total:5.1f}% {report.read}/{report.window} "
                f"changed={report.changed} applied={report.applied}"
            )
            if final:
                self._out.write("\n")
        else:
            line = {
                "event": "rescan_progress",
                **report.counts(),
                "fraction": round(report.read / total, 4),
                "elapsed_s": round(elapsed, 1),
            }
            self._out.write(orjson.dumps(line).decode() + "\n")
        self._out.flush()


def _request(args: argparse.Namespace, settings: WorkerSettings) -> RescanRequest:
    if args.since is None or args.model is None:
        raise ArgumentError("a new rescan needs --since and --model (or --resume RESCAN_ID)")
    now = datetime.now(UTC)
    since = parse_moment(args.since, now)
    until = parse_moment(args.until, now) if args.until is not None else now
    if since >= until:
        raise ArgumentError(
            f"--since ({since.isoformat()}) must be before --until ({until.isoformat()})"
        )
    name, version = parse_model_ref(args.model)
    return RescanRequest(
        topic=args.topic or settings.kafka.input_topic,
        since=since,
        until=until,
        group_id=args.group,
        model_name=name,
        model_version=version,
        apply=bool(args.apply),
    )


async def _rescan(args: argparse.Namespace, settings: WorkerSettings) -> int:
    resume: uuid.UUID | None = None
    if args.resume is not None:
        try:
            resume = uuid.UUID(args.resume)
        except ValueError as exc:
            raise ArgumentError(f"--resume {args.resume!r} is not a rescan id (a UUID)") from exc
    if resume is not None:
        plan = await stored_rescan(settings, resume)
        if plan is None:
            raise RescanNotFound(f"no rescan {resume}")
        request = None
        name, version, topic = plan.model_name, plan.model_version, plan.topic
    else:
        plan = None
        request = _request(args, settings)
        name, version, topic = request.model_name, request.model_version, request.topic
    parts = build_rescan(
        settings,
        model_name=name,
        model_version=version,
        rate=float(args.rate),
        batch_items=int(args.batch),
        topic=topic,
    )
    progress = ProgressPrinter(sys.stderr)
    async with AsyncExitStack() as stack:
        if args.metrics_port is not None:
            metrics = HealthServer(
                settings.http.host, int(args.metrics_port), parts.moderation.metrics, _running
            )
            await metrics.start()
            stack.push_async_callback(metrics.stop)
        await parts.open(stack, ready_timeout_s=float(args.wait_ready_s))
        if plan is None:
            assert request is not None
            plan = await parts.rescanner.plan(request)
        print(f"rescan_id={plan.rescan_id}", flush=True)
        report = await parts.rescanner.run(plan, progress)
    progress(report, final=True)
    print(report.render())
    print(
        f"rescan_id={plan.rescan_id} finished=true apply={str(plan.apply).lower()} "
        f"changed={report.changed} applied={report.applied} expired={report.expired} "
        f"kept={report.kept}"
    )
    return 0


def _running() -> tuple[bool, str]:
    """``/readyz`` of a rescan: ready while it runs."""
    return True, "rescanning"


def _run(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    configure_logging(settings.log_level)
    try:
        return asyncio.run(_rescan(args, settings))
    except (ArgumentError, RescanNotFound) as exc:
        print(f"modstream rescan: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    except RescanStopped as exc:
        _log.error("rescan_stopped", rescan_id=str(exc.rescan_id), error=str(exc))
        print(f"modstream rescan: {exc}", file=sys.stderr)
        return _EXIT_STOPPED
    except StoreError as exc:
        _log.error("rescan_store_unavailable", error=str(exc))
        print(f"modstream rescan: PostgreSQL failed ({exc}); resume with --resume", file=sys.stderr)
        return _EXIT_STOPPED


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def register(subparsers: Any) -> None:
    rescan = subparsers.add_parser(
        "rescan",
        help="decide a window of history again with a chosen model; report (or --apply) changes",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    rescan.add_argument("--since", help="window start: a duration ago (7d, 12h) or an ISO instant")
    rescan.add_argument("--until", help="window end (default: now)")
    rescan.add_argument("--group", help="only this chat group's messages")
    rescan.add_argument("--model", help="NAME or NAME:VERSION to score with, e.g. moderation:2")
    rescan.add_argument(
        "--apply",
        action="store_true",
        help="update changed verdicts, open review items, publish them (default: report only)",
    )
    rescan.add_argument("--resume", metavar="RESCAN_ID", help="go on with a rescan that stopped")
    rescan.add_argument("--topic", help="source topic (default: kafka.input_topic)")
    rescan.add_argument(
        "--rate",
        type=_positive(float),
        default=200.0,
        help="records read per second at most, to leave room for live traffic (default 200)",
    )
    rescan.add_argument(
        "--batch", type=_positive(int), default=100, help="records per model call (default 100)"
    )
    rescan.add_argument(
        "--wait-ready-s",
        type=_positive(float),
        default=60.0,
        help="how long to wait for the model to be ready (default 60)",
    )
    rescan.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics on http.host at this port while the rescan runs (default: none)",
    )
    rescan.set_defaults(handler=_run)
