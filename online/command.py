"""``modstream online``: the command; the service is imported only when it runs."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from common.logs import configure_logging
from online.settings import OnlineSettings

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from online.app import OnlineFailed, serve_until_signalled  # grpc, parts: not for --help

    settings = OnlineSettings()
    if args.port is not None:
        online = settings.online.model_copy(update={"port": args.port})
        settings = settings.model_copy(update={"online": online})
    configure_logging(settings.log_level)
    try:
        asyncio.run(serve_until_signalled(settings))
    except OnlineFailed:
        return 1  # already logged where it happened, without message text
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "online", help="serve ModerationService.CheckMessage over gRPC until SIGTERM"
    )
    parser.add_argument("--port", type=int, default=None, help="default: online.port (18070)")
    parser.set_defaults(handler=_run)
