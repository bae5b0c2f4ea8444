"""The model's share of a caller's deadline, applied to the one Triton call of a batch.

The collector sets :data:`MODEL_DEADLINE` (a ``time.monotonic()`` instant) in the task that runs
a model batch: the earliest model deadline of its messages. :class:`BudgetedInference` wraps the
daemon's Triton client and gives up at that instant with ``InferenceUnavailable``, which the
daemon's ``BatchProcessor`` already answers with rules-only ``pending_model`` verdicts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Protocol

from engine.inference import InferenceResult, InferenceUnavailable

__all__ = ["MODEL_DEADLINE", "BudgetedInference", "ModelClient"]

MODEL_DEADLINE: ContextVar[float | None] = ContextVar("online_model_deadline", default=None)
"""When the current batch's model call must have answered (``None``: no limit of our own)."""


class ModelClient(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


class BudgetedInference:
    """``infer`` bounded by :data:`MODEL_DEADLINE` (a spent budget makes no call at all);
    ``on_spent(n)`` hears of each of the ``n`` messages of a call whose budget ran out."""

    def __init__(self, client: ModelClient, on_spent: Callable[[int], None] | None = None) -> None:
        self._client = client
        self._on_spent = on_spent

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        deadline = MODEL_DEADLINE.get()
        if deadline is None:
            return await self._client.infer(texts)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self._spent(len(texts))
            raise InferenceUnavailable("model budget spent before the call")
        try:
            async with asyncio.timeout(remaining):
                return await self._client.infer(texts)
        except TimeoutError as exc:
            self._spent(len(texts))
            raise InferenceUnavailable(f"model budget of {remaining * 1000:.0f} ms spent") from exc

    def _spent(self, messages: int) -> None:
        if self._on_spent is not None:
            self._on_spent(messages)
