"""Tests for pipelines.scores: the model contract's rows, with and without the HARMS output."""

from __future__ import annotations

import math

import pytest

from pipelines.scores import HARM_LABELS, HARMS_OUTPUT, MODEL_OUTPUTS, ModelScores, ScoreRowError

SENTIMENT = (0.2, 0.5, 0.3)
INTENT = (0.7, 0.1, 0.1, 0.1)
TOXICITY = (0.9, 0.05, 0.05)
HARMS = (0.8, 0.02, 0.0, 1.0, 0.3)


def _scores(harms: tuple[float, ...] | None) -> ModelScores:
    return ModelScores(SENTIMENT, INTENT, TOXICITY, harms)


def test_harm_labels_are_the_contracts_five_in_order() -> None:
    """The HARMS output's label order is the one the model is trained to, and it is not one of
    the required outputs (older models do not have it)."""
    assert HARM_LABELS == (
        "insult",
        "threat",
        "self_harm",
        "self_harm_incitement",
        "sexual_solicitation",
    )
    assert HARMS_OUTPUT == "HARMS"
    assert HARMS_OUTPUT not in MODEL_OUTPUTS


def test_harms_default_to_none_and_stay_out_of_the_dict() -> None:
    """A model without HARMS: ``harms`` is None, ``as_dict`` has only the three tasks and
    ``harm`` answers None."""
    scores = ModelScores(SENTIMENT, INTENT, TOXICITY)
    assert scores.harms is None
    assert set(scores.as_dict()) == {"sentiment", "intent", "toxicity"}
    assert scores.harm("threat") is None


def test_harms_are_independent_probabilities_keyed_by_label() -> None:
    """Five probabilities that need not sum to 1 are accepted; ``as_dict`` adds them under
    ``harms`` by label; ``labels`` stays the three argmax labels."""
    scores = _scores(HARMS)
    assert scores.as_dict()["harms"] == dict(zip(HARM_LABELS, HARMS, strict=True))
    assert scores.harm("insult") == 0.8
    assert scores.harm("self_harm_incitement") == 1.0
    assert set(scores.labels()) == {"sentiment", "intent", "toxicity"}


@pytest.mark.parametrize(
    ("harms", "message"),
    [
        ((0.1, 0.1, 0.1, 0.1), "expected 5 scores, got 4"),
        ((0.1,) * 6, "expected 5 scores, got 6"),
        ((0.1, 0.1, 1.01, 0.1, 0.1), r"\[0, 1\]"),
        ((0.1, -0.001, 0.1, 0.1, 0.1), r"\[0, 1\]"),
        ((0.1, 0.1, 0.1, math.nan, 0.1), r"\[0, 1\]"),
        ((0.1, 0.1, 0.1, 0.1, math.inf), r"\[0, 1\]"),
    ],
)
def test_a_bad_harms_row_is_a_score_row_error(harms: tuple[float, ...], message: str) -> None:
    """Wrong width, a value outside [0, 1], NaN or an infinity: ``ScoreRowError`` naming
    HARMS."""
    with pytest.raises(ScoreRowError, match=message) as raised:
        _scores(harms)
    assert str(raised.value).startswith("HARMS:")


def test_a_harms_value_that_is_not_a_number_is_a_score_row_error() -> None:
    """A string among the harms is refused with the contract's error, not a ``TypeError``."""
    with pytest.raises(ScoreRowError, match="must be numbers"):
        _scores((0.1, 0.1, "0.1", 0.1, 0.1))  # type: ignore[arg-type]
