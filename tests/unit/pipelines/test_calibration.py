"""Tests for pipelines.calibration on generated moderator decisions whose best thresholds are
known: exactly for separable decisions, analytically for calibrated random scores."""

from __future__ import annotations

import random

import pytest

from pipelines.calibration import (
    CalibrationError,
    ReviewedScore,
    by_category,
    category_score,
    propose,
    wilson_interval,
)
from pipelines.scores import ModelScores


def _grid(harmful_from: float) -> list[ReviewedScore]:
    """Scores 0.00, 0.01 ... 0.99; harmful exactly from ``harmful_from`` up."""
    return [ReviewedScore(i / 100, i / 100 >= harmful_from - 1e-9) for i in range(100)]


def test_separable_decisions_give_the_exact_threshold() -> None:
    """Harmful exactly from 0.70: at precision 1.0 the proposal is 0.70 with recall 1; at 0.9 it
    is 0.67, the lowest score keeping 30 harmful of 33 flagged (0.909)."""
    exact = propose("hate", _grid(0.70), target_precision=1.0, min_decisions=50)
    assert (exact.threshold, exact.precision, exact.recall, exact.flagged) == (0.70, 1.0, 1.0, 30)
    looser = propose("hate", _grid(0.70), target_precision=0.9, min_decisions=50)
    assert looser.threshold == 0.67
    assert looser.flagged == 33
    assert looser.precision == pytest.approx(30 / 33)
    assert looser.field == "flag_hate"
    assert looser.decisions == 100
    assert looser.harmful == 30


@pytest.mark.parametrize(
    ("power", "best"),
    [
        # P(harmful | s) = s, s uniform: precision above t is (1 + t) / 2 = 0.9 at t = 0.8.
        (1, 0.8),
        # P(harmful | s) = s^2: (1 + t + t^2) / 3 = 0.9 at t = (sqrt(7.8) - 1) / 2.
        (2, (7.8**0.5 - 1) / 2),
    ],
)
def test_calibrated_random_scores_find_the_analytic_threshold(power: int, best: float) -> None:
    """20,000 decisions drawn with a known harm probability per score: the proposal lies within
    0.02 of the analytic best threshold and its 95 % interval contains it."""
    rng = random.Random(power)
    decisions = []
    for _ in range(20_000):
        score = rng.random()
        decisions.append(ReviewedScore(score, rng.random() < score**power))
    got = propose("offensive", decisions, target_precision=0.9, min_decisions=100, seed=3)
    assert got.threshold is not None
    assert abs(got.threshold - best) < 0.02
    assert got.threshold_low is not None
    assert got.threshold_high is not None
    assert got.threshold_low <= best <= got.threshold_high
    assert got.threshold_high - got.threshold_low < 0.1
    assert got.precision is not None
    assert got.precision >= 0.9
    assert got.precision_low is not None
    assert got.precision_high is not None
    assert got.precision_low <= got.precision <= got.precision_high
    assert got.precision_high - got.precision_low < 0.03  # about 2,000 flagged decisions


def test_too_few_decisions_no_harm_or_an_unreachable_target_are_refused() -> None:
    """A category below min_decisions, one without a harmful decision, and one where no
    threshold reaches the target get no threshold and say why."""
    few = propose("spam", _grid(0.5)[:40], target_precision=0.9, min_decisions=50)
    assert few.threshold is None
    assert few.refused == "40 decisions, fewer than the 50 required"
    harmless = [ReviewedScore(i / 100, False) for i in range(100)]
    none = propose("spam", harmless, target_precision=0.9, min_decisions=50)
    assert none.refused == "no decision found a message harmful"
    mixed = [ReviewedScore(0.9, i % 2 == 0) for i in range(100)]
    unreachable = propose("spam", mixed, target_precision=0.9, min_decisions=50)
    assert unreachable.threshold is None
    assert unreachable.refused is not None
    assert "no threshold reaches precision 0.9" in unreachable.refused


def test_the_same_decisions_give_the_same_report() -> None:
    """The bootstrap is seeded: two runs over the same input agree to the last digit."""
    rng = random.Random(5)
    decisions = [ReviewedScore(s, rng.random() < s) for s in (rng.random() for _ in range(500))]
    one = propose("advertisement", decisions, target_precision=0.8, min_decisions=50)
    two = propose("advertisement", decisions, target_precision=0.8, min_decisions=50)
    assert one == two


def test_wilson_interval_matches_the_textbook_value() -> None:
    """8 of 10 at 95 %: (0.4902, 0.9433)."""
    low, high = wilson_interval(8, 10, 0.95)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)


def test_each_category_is_scored_as_the_policy_scores_it() -> None:
    """hate reads P(hate), offensive 1 - P(none), spam and advertisement their intents; rows of
    other categories are left out; an unknown category is an error."""
    scores = ModelScores((0.2, 0.6, 0.2), (0.1, 0.1, 0.5, 0.3), (0.6, 0.3, 0.1))
    assert category_score("hate", scores) == 0.1
    assert category_score("offensive", scores) == pytest.approx(0.4)
    assert category_score("spam", scores) == 0.5
    assert category_score("advertisement", scores) == 0.3
    grouped = by_category([("spam", scores, True), ("threat", scores, True)])
    assert grouped["spam"] == [ReviewedScore(0.5, True)]
    assert sum(len(v) for v in grouped.values()) == 1
    with pytest.raises(CalibrationError):
        category_score("threat", scores)


def test_arguments_that_cannot_work_are_refused() -> None:
    """A target outside (0, 1] or a confidence outside (0, 1) is an error, not a proposal."""
    with pytest.raises(CalibrationError):
        propose("hate", _grid(0.5), target_precision=0.0, min_decisions=1)
    with pytest.raises(CalibrationError):
        propose("hate", _grid(0.5), target_precision=0.9, min_decisions=1, confidence=1.0)
