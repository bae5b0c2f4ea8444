"""The ``modstream`` command line: one sub-command group per module.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)``, which adds its sub-command(s)
and sets ``handler`` (a callable taking the parsed namespace and the settings, returning an exit
code). Modules keep their heavy imports inside the handler so ``modstream --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from worker.settings import Settings

__all__ = ["COMMAND_MODULES", "Handler", "main"]

Handler = Callable[[argparse.Namespace, Settings], int]

COMMAND_MODULES: tuple[str, ...] = (
    "worker.migrate",
    "worker.app",
    "worker.demo",
    "worker.review.command",
    "worker.retention",
    "worker.stack.command",
    "worker.models_command",
    "worker.rescore",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modstream", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for dotted in COMMAND_MODULES:
        importlib.import_module(dotted).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = Settings()
    handler: Handler = args.handler
    return handler(args, settings)


if __name__ == "__main__":
    sys.exit(main())
