"""The ``modstream`` command line: one sub-command group per program module.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)``, which adds its sub-command(s)
and sets ``handler`` (a callable taking the parsed namespace, returning an exit code). Each
handler loads its own program's settings object once (the daemon's, the review service's, the
stack's), so no program sees another's sections. Modules keep their heavy imports inside the
handler so ``modstream --help`` stays fast.

This is the top of the import graph: it names every program; no program imports it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

__all__ = ["COMMAND_MODULES", "Handler", "main"]

Handler = Callable[[argparse.Namespace], int]

COMMAND_MODULES: tuple[str, ...] = (
    "admin.migrate",
    "worker.app",
    "stack.demo",
    "review.command",
    "admin.retention",
    "stack.command",
    "modelbuild.command",
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
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
