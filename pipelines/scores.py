"""The model contract shared with Triton: label orders and per-message scores.

The model ``moderation`` takes ``TEXT`` (TYPE_STRING, dims [1]) and returns three FP32 rows per
message, each summing to 1, in the label orders below (``MODEL_OUTPUTS``, required of every
model). ``model_repository/`` is built to it.

A model may also declare the optional output ``HARMS`` (``HARMS_OUTPUT``, FP32 [n, 5]): five
independent calibrated probabilities in the order of ``HARM_LABELS``, each in [0, 1], not
summing to 1. Models without it (the ones built before it) give ``ModelScores.harms = None``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.errors import PipelineError

__all__ = [
    "HARMS_OUTPUT",
    "HARM_LABELS",
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
"""The outputs every model has, with their label orders (rows summing to 1)."""
HARMS_OUTPUT = "HARMS"
HARM_LABELS: tuple[str, ...] = (
    "insult",
    "threat",
    "self_harm",
    "self_harm_incitement",
    "sexual_solicitation",
)
"""The optional output's labels: an insult aimed at a participant of the conversation; a threat
of violence against a person; the writer's own intent to hurt or kill themselves; telling
someone else to hurt or kill themselves; sexual solicitation. Each an independent probability."""

_ROW_SUM_TOLERANCE = 1e-3


class ScoreRowError(PipelineError):
    """A model returned a row that breaks the contract (wrong width, NaN, out of [0, 1], a
    distribution not summing to 1)."""


def _check_probabilities(task: str, row: tuple[float, ...], labels: tuple[str, ...]) -> None:
    if len(row) != len(labels):
        raise ScoreRowError(f"{task}: expected {len(labels)} scores, got {len(row)}")
    try:
        outside = any(not (0.0 <= p <= 1.0) for p in row)  # also NaN and infinities
    except TypeError as exc:
        raise ScoreRowError(f"{task}: scores must be numbers") from exc
    if outside:
        raise ScoreRowError(f"{task}: scores must lie in [0, 1]")


def _check_row(task: str, row: tuple[float, ...], labels: tuple[str, ...]) -> None:
    _check_probabilities(task, row, labels)
    if abs(sum(row) - 1.0) > _ROW_SUM_TOLERANCE:
        raise ScoreRowError(f"{task}: scores must sum to 1, got {sum(row):.4f}")


@dataclass(frozen=True, slots=True)
class ModelScores:
    """One message's probabilities per task, validated against the contract on creation.

    ``harms`` is ``None`` for a model without the ``HARMS`` output; otherwise one independent
    probability per ``HARM_LABELS`` entry (no sum is checked)."""

    sentiment: tuple[float, ...]
    intent: tuple[float, ...]
    toxicity: tuple[float, ...]
    harms: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _check_row("SENTIMENT", self.sentiment, SENTIMENT_LABELS)
        _check_row("INTENT", self.intent, INTENT_LABELS)
        _check_row("TOXICITY", self.toxicity, TOXICITY_LABELS)
        if self.harms is not None:
            _check_probabilities(HARMS_OUTPUT, self.harms, HARM_LABELS)

    def harm(self, label: str) -> float | None:
        """The probability of one harm (a ``HARM_LABELS`` entry); ``None`` without ``harms``."""
        if self.harms is None:
            return None
        return self.harms[HARM_LABELS.index(label)]

    def labels(self) -> dict[str, str]:
        """The most probable label per task (not for ``harms``: its probabilities are
        independent, none of them is "the" label)."""
        return {
            "sentiment": _argmax(self.sentiment, SENTIMENT_LABELS),
            "intent": _argmax(self.intent, INTENT_LABELS),
            "toxicity": _argmax(self.toxicity, TOXICITY_LABELS),
        }

    def as_dict(self) -> dict[str, dict[str, float]]:
        """Scores keyed by task and label, the shape stored in Postgres and published;
        ``"harms"`` only when the model gave them."""
        tasks = {
            "sentiment": dict(zip(SENTIMENT_LABELS, self.sentiment, strict=True)),
            "intent": dict(zip(INTENT_LABELS, self.intent, strict=True)),
            "toxicity": dict(zip(TOXICITY_LABELS, self.toxicity, strict=True)),
        }
        if self.harms is not None:
            tasks["harms"] = dict(zip(HARM_LABELS, self.harms, strict=True))
        return tasks


def _argmax(row: tuple[float, ...], labels: tuple[str, ...]) -> str:
    best = max(range(len(row)), key=row.__getitem__)
    return labels[best]
