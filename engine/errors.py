"""The root of the engine's errors (``engine``: what both moderating services run).

Every error the engine raises on purpose is an :class:`EngineError`: the stores'
(``engine.stores.database``: ``StoreError`` and its kinds), the inference client's
(``engine.inference``: ``InferenceError`` and its kinds), the replica lookup's
(``engine.replica_dns``) and the failpoints' (``engine.failpoints``). ``retriable`` says whether
the same call may succeed later; it is read where the retry is decided: the batch writer retries
a retriable store error and isolates the rows of any other, the Triton client retries a
retriable inference error on another replica and re-raises any other, the re-scorer halves a
page the model refused and defers when the model is away.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["EngineError"]


class EngineError(Exception):
    """An error of the engine's parts (see the module docstring)."""

    retriable: ClassVar[bool] = False
