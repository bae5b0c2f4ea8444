"""What every inference backend is to the pipeline: a typed client, its result and its errors.

The processor, the re-scorer and the services see only :class:`InferenceClient`; which backend
stands behind it is chosen by ``engine.parts`` (``inference.backend``): the KServe v2 gRPC
client of ``engine.triton`` (Triton, MLServer), or the in-process model of ``engine.inprocess``.
Both turn the model's three output tensors (and ``HARMS`` when the model has it) into scores with
:func:`scores_from_outputs`.
A backend wraps its own failures at the edge: :class:`InferenceUnavailable` when it cannot answer
now (callers fall back to rules-only ``pending_model`` verdicts and re-score later),
:class:`InferenceRejected` when it refused these inputs (retrying them will not help).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from engine.breaker import BreakerState
from engine.errors import EngineError
from pipelines.scores import HARMS_OUTPUT, ModelScores, ScoreRowError

__all__ = [
    "InferenceClient",
    "InferenceError",
    "InferenceRejected",
    "InferenceResult",
    "InferenceUnavailable",
    "scores_from_outputs",
]


class InferenceError(EngineError):
    """The model gave no scores; ``retriable`` says whether it may later (see the kinds)."""


class InferenceUnavailable(InferenceError):
    """The server cannot answer now (down, overloaded, deadline, circuit open)."""

    retriable = True


class InferenceRejected(InferenceError):
    """The server refused the request or broke the model contract; retrying will not help."""

    retriable = False


@dataclass(frozen=True, slots=True)
class InferenceResult:
    scores: list[ModelScores]
    model_name: str
    model_version: str
    latency_ms: float


class InferenceClient(Protocol):
    """A moderation model backend, as the services and the processor use it."""

    @property
    def state(self) -> BreakerState:
        """``CLOSED`` while calls may go out; ``OPEN`` while every call would fail fast."""

    async def start(self, *, wait_ready: bool = True) -> None: ...

    async def stop(self) -> None: ...

    async def wait_ready(self, timeout_s: float) -> None:
        """Return once the model answers; ``InferenceUnavailable`` after ``timeout_s``."""

    async def probe(self) -> bool:
        """Let a backend that stopped taking calls try again; whether calls may go out now."""

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        """One row of scores per text, in order."""


def _rows(array: Any, n: int, task: str) -> list[tuple[float, ...]]:
    if array is None:
        raise InferenceRejected(f"{task}: missing from the response")
    matrix = np.asarray(array, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise InferenceRejected(f"{task}: expected {n} rows, got shape {matrix.shape}")
    return [tuple(row) for row in matrix.tolist()]


def scores_from_outputs(output: Callable[[str], Any | None], n: int) -> list[ModelScores]:
    """One :class:`ModelScores` per text from the model's ``SENTIMENT``, ``INTENT`` and
    ``TOXICITY`` arrays and, when the response has it, ``HARMS`` (``output(name)`` gives each,
    ``None`` for one the response lacks); ``InferenceRejected`` when a required array is
    missing or a shape or a row breaks the contract (``pipelines.scores``). Without ``HARMS``
    every row's ``harms`` is ``None``."""
    sentiment = _rows(output("SENTIMENT"), n, "SENTIMENT")
    intent = _rows(output("INTENT"), n, "INTENT")
    toxicity = _rows(output("TOXICITY"), n, "TOXICITY")
    harms_array = output(HARMS_OUTPUT)
    harms: list[tuple[float, ...] | None] = (
        [None] * n if harms_array is None else list(_rows(harms_array, n, HARMS_OUTPUT))
    )
    try:
        return [
            ModelScores(s, i, t, h)
            for s, i, t, h in zip(sentiment, intent, toxicity, harms, strict=True)
        ]
    except ScoreRowError as exc:
        raise InferenceRejected(f"contract violation: {exc}") from exc
