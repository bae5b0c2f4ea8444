"""Command groups that more than one program adds actions to (``modstream models``).

``modstream models`` holds ``build`` and ``eval`` (``modelbuild.command``, development only) and
``push`` and ``pull`` (``admin.models_command``, in the production image too): each module asks
:func:`command_group` for the group's actions and adds its own, whichever registers first.
"""

from __future__ import annotations

import argparse
import weakref
from typing import Any

__all__ = ["command_group"]

_GROUPS: weakref.WeakKeyDictionary[argparse.ArgumentParser, Any] = weakref.WeakKeyDictionary()
"""A group's parser -> its own sub-parsers (the actions added to it)."""


def command_group(subparsers: Any, name: str, help_text: str) -> Any:
    """The sub-parsers of ``modstream <name>``, made on first call (with ``help_text``)."""
    parser = subparsers.choices.get(name)
    if parser is None:
        parser = subparsers.add_parser(name, help=help_text)
    if parser not in _GROUPS:
        _GROUPS[parser] = parser.add_subparsers(
            dest=f"{name}_action", required=True, metavar="ACTION"
        )
    return _GROUPS[parser]
