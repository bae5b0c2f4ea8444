"""The root of the database administration commands' errors (``modstream migrate``,
``modstream retention``): each ends its command with a message, none is retried."""

from __future__ import annotations

__all__ = ["AdminError"]


class AdminError(Exception):
    """An administration command cannot go on (see the module docstring)."""
