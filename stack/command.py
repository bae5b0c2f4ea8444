"""``modstream stack up | down | status``: the local services for development and tests."""

from __future__ import annotations

import argparse
import time
from typing import Any

from stack.settings import StackToolSettings

__all__ = ["register"]


def _only(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give one or more of: postgres, kafka, triton")
    return names


def register(subparsers: Any) -> None:
    """Add the ``stack`` command group."""
    parser = subparsers.add_parser(
        "stack",
        help="run Kafka, PostgreSQL and Triton locally (no Docker)",
        description=__doc__,
    )
    actions = parser.add_subparsers(dest="stack_action", required=True, metavar="ACTION")
    for action, text in (
        ("up", "start what is not running, wait until healthy, create the topics"),
        ("down", "stop the processes this stack started (nothing else)"),
        ("status", "show each service; exit 1 when any is down or unhealthy"),
    ):
        sub = actions.add_parser(action, help=text, description=text)
        sub.add_argument(
            "--only",
            type=_only,
            default=None,
            metavar="NAMES",
            help="comma-separated subset of postgres,kafka,triton",
        )
        sub.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = StackToolSettings()
    from stack.errors import StackError
    from stack.local_stack import LocalStack

    stack = LocalStack(settings)
    try:
        if args.stack_action == "up":
            return _up(stack, args.only)
        if args.stack_action == "down":
            stopped = stack.down(args.only)
            print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
            return 0
        return _status(stack, args.only)
    except StackError as exc:
        print(f"modstream stack {args.stack_action}: {exc}")
        return 1


def _up(stack: Any, only: list[str] | None) -> int:
    started_at = time.monotonic()
    report = stack.up(only)
    elapsed_s = time.monotonic() - started_at
    for status in stack.status(only):
        how = "started" if status.name in report.started else "already running"
        print(
            f"{status.name:<8} {how:<15} pid={status.pid} endpoint={status.endpoint} "
            f"log={status.log_path}"
        )
    extra = stack.services
    if "triton" in extra and (only is None or "triton" in only):
        print(f"triton   http={extra['triton'].http_url} grpc={extra['triton'].endpoint}")
    if "postgres" in extra and (only is None or "postgres" in only):
        print(f"postgres dsn={extra['postgres'].dsn}")
        for service, dsn in extra["postgres"].service_dsns().items():
            print(f"postgres {service} dsn={dsn}")
    if report.topics_created:
        print(f"topics created: {', '.join(report.topics_created)}")
    print(f"stack up in {elapsed_s:.1f} s")
    return 0


def _status(stack: Any, only: list[str] | None) -> int:
    worst = 0
    for status in stack.status(only):
        state = "running" if status.running else "stopped"
        health = ("healthy" if status.healthy else "unhealthy") if status.running else "-"
        if not (status.running and status.healthy):
            worst = 1
        print(
            f"{status.name:<8} {state:<7} {health:<9} pid={status.pid} "
            f"endpoint={status.endpoint} log={status.log_path}"
        )
    return worst
