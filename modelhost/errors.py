"""The root of ``modelhost``'s errors: a model that cannot be read, loaded or called."""

from __future__ import annotations

__all__ = ["ModelHostError"]


class ModelHostError(Exception):
    """A Triton Python-backend model could not be read, loaded or called outside Triton."""
