"""The root of the worker's errors (the stream daemon's own parts).

Every error the worker raises on purpose is a :class:`WorkerError`: ``WorkerFailed``, the
command line's ``ArgumentError`` and the rescan's (``worker.history``, ``worker.rescan_plan``).
The errors of the parts both services run (the inference client, the stores, the failpoints, the
replica lookup) are the engine's (``engine.errors``). ``retriable`` says whether the same call
may succeed later.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["WorkerError"]


class WorkerError(Exception):
    """An error of the worker's parts (see the module docstring)."""

    retriable: ClassVar[bool] = False
