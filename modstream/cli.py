"""The ``modstream`` command line: one sub-command group per program module.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)``, which adds its sub-command(s)
and sets ``handler`` (a callable taking the parsed namespace, returning an exit code). Each
handler loads its own program's settings object once (the daemon's, the review service's, the
stack's), so no program sees another's sections. Modules keep their heavy imports inside the
handler so ``modstream --help`` stays fast.

This is the top of the import graph: it names every program; no program imports it. A command
whose program is not installed is not offered: the production image (``Dockerfile``) ships the
daemon, the review service and the admin commands, and leaves out the development stack and the
model tools (``PRODUCTION_COMMANDS`` lists what it offers; a test builds that wheel and runs
each one's ``--help`` in a fresh virtual environment).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

__all__ = ["COMMAND_MODULES", "PRODUCTION_COMMANDS", "Handler", "available_modules", "main"]

Handler = Callable[[argparse.Namespace], int]

COMMAND_MODULES: tuple[str, ...] = (
    "admin.migrate",
    "worker.command",
    "worker.policy_command",
    "worker.rules_command",
    "worker.rescan_command",
    "stack.demo",
    "review.command",
    "admin.retention",
    "admin.rollups",
    "admin.models_command",
    "stack.command",
    "modelbuild.command",
    "online.command",
)

PRODUCTION_COMMANDS: tuple[str, ...] = (
    "migrate",
    "worker",
    "review",
    "retention",
    "rollups",
    "rescore",
    "rescan",
    "online",
    "policy",
    "rules",
    "models",
)
"""The sub-commands the production image offers (its packages: see ``.dockerignore``)."""


def available_modules() -> list[str]:
    """The command modules whose top-level package is installed here."""
    return [
        dotted
        for dotted in COMMAND_MODULES
        if importlib.util.find_spec(dotted.partition(".")[0]) is not None
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modstream", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for dotted in available_modules():
        importlib.import_module(dotted).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
