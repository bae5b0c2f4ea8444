"""The root of the worker's errors (the daemon's parts, also run by the online service).

Every error the worker raises on purpose is a :class:`WorkerError`: the inference client's
(``worker.inference``: ``InferenceError`` and its kinds), the failpoints' and ``WorkerFailed``
(the stores' errors are the engine's, ``engine.errors``). ``retriable`` says whether the same
call may succeed later; it is read where the retry is decided: the Triton client retries a
retriable inference error on another replica and re-raises any other, the re-scorer halves a
page the model refused and defers when the model is away.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["WorkerError"]


class WorkerError(Exception):
    """An error of the worker's parts (see the module docstring)."""

    retriable: ClassVar[bool] = False
