"""Scoring a page of texts when the model may refuse some: halve until the refused stand alone.

The re-scorer and the rescan both score pages of stored or historical texts. When the model
refuses a page (``InferenceRejected``, e.g. Triton ``INVALID_ARGUMENT``), :func:`score_or_refuse`
splits it in halves until each refused text is alone; every other text is scored, so one bad
text never stalls the rest. ``InferenceUnavailable`` (the model cannot answer now) propagates:
nothing is decided then, and the caller retries the page later.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from engine.inference import InferenceError, InferenceResult
from pipelines.scores import ModelScores
from pipelines.verdict_factory import ModelRun

__all__ = ["Refused", "Scored", "refusal_reason", "score_or_refuse"]

T = TypeVar("T")


class _Inference(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


@dataclass(frozen=True, slots=True)
class Scored(Generic[T]):
    item: T
    scores: ModelScores
    run: ModelRun
    """The model call these scores came from (one per page or half-page scored)."""


@dataclass(frozen=True, slots=True)
class Refused(Generic[T]):
    item: T
    reason: str
    """The refusal's status (:func:`refusal_reason`), never the server's full message."""


def refusal_reason(exc: InferenceError) -> str:
    """The refusal's status without the server's message (which may quote the input)."""
    return str(exc).split(":", 1)[0][:200]


async def score_or_refuse(
    inference: _Inference, items: Sequence[T], texts: Sequence[str]
) -> tuple[list[Scored[T]], list[Refused[T]]]:
    """Scores for ``items`` (``texts[i]`` is what the model reads for ``items[i]``); those the
    model refuses are found by halving and returned apart."""
    if not items:
        return [], []
    try:
        result = await inference.infer(list(texts))
    except InferenceError as exc:
        if exc.retriable:
            raise  # the model is away: nothing is decided, the caller retries
        if len(items) == 1:
            return [], [Refused(items[0], refusal_reason(exc))]
        half = len(items) // 2
        left, left_refused = await score_or_refuse(inference, items[:half], texts[:half])
        right, right_refused = await score_or_refuse(inference, items[half:], texts[half:])
        return [*left, *right], [*left_refused, *right_refused]
    run = ModelRun(result.model_name, result.model_version, str(uuid.uuid4()), result.latency_ms)
    return [Scored(i, s, run) for i, s in zip(items, result.scores, strict=True)], []
