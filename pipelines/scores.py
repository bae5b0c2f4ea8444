"""The model contract shared with Triton: label orders and per-message scores.

The model ``moderation`` takes ``TEXT`` (TYPE_STRING, dims [1]) and returns three FP32 rows per
message, each summing to 1, in the label orders below. ``model_repository/`` is built to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.errors import PipelineError

__all__ = [
    "INTENT_LABELS",
    "MODEL_INPUT",
    "MODEL_OUTPUTS",
    "SENTIMENT_LABELS",
    "TOXICITY_LABELS",
    "ModelScores",
    "ScoreRowError",
]

MODEL_INPUT = "TEXT"
SENTIMENT_LABELS: tuple[str, ...] = ("negative", "neutral", "positive")
INTENT_LABELS: tuple[str, ...] = ("chat", "question", "spam", "advertisement")
TOXICITY_LABELS: tuple[str, ...] = ("none", "offensive", "hate")
MODEL_OUTPUTS: dict[str, tuple[str, ...]] = {
    "SENTIMENT": SENTIMENT_LABELS,
    "INTENT": INTENT_LABELS,
    "TOXICITY": TOXICITY_LABELS,
}

_ROW_SUM_TOLERANCE = 1e-3


class ScoreRowError(PipelineError):
    """A model returned a row that breaks the contract (wrong width, NaN, not summing to 1)."""


def _check_row(task: str, row: tuple[float, ...], labels: tuple[str, ...]) -> None:
    if len(row) != len(labels):
        raise ScoreRowError(f"{task}: expected {len(labels)} scores, got {len(row)}")
    if any(not (0.0 <= p <= 1.0) for p in row):  # also rejects NaN
        raise ScoreRowError(f"{task}: scores must lie in [0, 1]")
    if abs(sum(row) - 1.0) > _ROW_SUM_TOLERANCE:
        raise ScoreRowError(f"{task}: scores must sum to 1, got {sum(row):.4f}")


@dataclass(frozen=True, slots=True)
class ModelScores:
    """One message's probabilities per task, validated against the contract on creation."""

    sentiment: tuple[float, ...]
    intent: tuple[float, ...]
    toxicity: tuple[float, ...]

    def __post_init__(self) -> None:
        _check_row("SENTIMENT", self.sentiment, SENTIMENT_LABELS)
        _check_row("INTENT", self.intent, INTENT_LABELS)
        _check_row("TOXICITY", self.toxicity, TOXICITY_LABELS)

    def labels(self) -> dict[str, str]:
        """The most probable label per task."""
        return {
            "sentiment": _argmax(self.sentiment, SENTIMENT_LABELS),
            "intent": _argmax(self.intent, INTENT_LABELS),
            "toxicity": _argmax(self.toxicity, TOXICITY_LABELS),
        }

    def as_dict(self) -> dict[str, dict[str, float]]:
        """Scores keyed by task and label, the shape stored in Postgres and published."""
        return {
            "sentiment": dict(zip(SENTIMENT_LABELS, self.sentiment, strict=True)),
            "intent": dict(zip(INTENT_LABELS, self.intent, strict=True)),
            "toxicity": dict(zip(TOXICITY_LABELS, self.toxicity, strict=True)),
        }


def _argmax(row: tuple[float, ...], labels: tuple[str, ...]) -> str:
    best = max(range(len(row)), key=row.__getitem__)
    return labels[best]
