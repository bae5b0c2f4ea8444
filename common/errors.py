"""The root of the errors of what every program shares (``common``): Kafka access and publishing.

A :class:`CommonError` says with ``retriable`` whether the same operation may succeed later; the
code that decides on a retry reads it (the worker's dead-letter sends, the review service's
decision relay).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["CommonError"]


class CommonError(Exception):
    """An error of a shared client; ``retriable``: trying the same operation again may work."""

    retriable: ClassVar[bool] = False
