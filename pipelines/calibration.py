"""Thresholds learnt from moderators: per category, the lowest flag threshold that keeps the
moderators' precision at a target.

Input: for each category the policy flags on a model score (``hate``, ``offensive``, ``spam``,
``advertisement``: :data:`CALIBRATED_FIELDS`), the reviewed verdicts of that category as
``(score, harmful)`` pairs. ``score`` is the one the policy compares with the category's flag
threshold (``category_score``: ``P(hate)``, ``1 - P(none)``, ``P(spam)``, ``P(advertisement)``);
``harmful`` is the moderator's decision (any resolution but approve).

For one category (:func:`propose`):

- fewer than ``min_decisions`` decisions, or none harmful: refused (the reason says which);
- the *precision* of a threshold ``t`` is the share of harmful decisions among those with
  ``score >= t``; its *recall* the share of all harmful decisions it keeps. The proposal is the
  lowest observed score whose precision reaches ``target_precision`` (the most recall at that
  precision); none reaching it: refused;
- its confidence interval (``confidence``, 0.95 by default) is a percentile bootstrap:
  ``resamples`` resamples of the decisions (seeded: the same input gives the same report), each
  with its own proposal; resamples whose proposal cannot reach the target count towards the
  upper end (they would flag nothing). The precision at the proposal gets a Wilson interval.

Reviewed verdicts are the ones that were escalated: the scores below the lowest escalated one
were never seen by a moderator, so a proposal can only be as low as the lowest reviewed score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from pipelines.errors import PipelineError
from pipelines.scores import ModelScores

__all__ = [
    "CALIBRATED_FIELDS",
    "CalibrationError",
    "Proposal",
    "ReviewedScore",
    "by_category",
    "category_score",
    "propose",
    "wilson_interval",
]

CALIBRATED_FIELDS: dict[str, str] = {
    "hate": "flag_hate",
    "offensive": "flag_offensive",
    "spam": "flag_spam",
    "advertisement": "flag_advertisement",
}
"""Category → the ``PolicyThresholds`` field its flag decision compares with its score."""


class CalibrationError(PipelineError):
    """Calibration arguments that cannot work (a target outside (0, 1], no resamples ...)."""


@dataclass(frozen=True, slots=True)
class ReviewedScore:
    """One moderator decision on a model-scored verdict of a category."""

    score: float
    harmful: bool


@dataclass(frozen=True, slots=True)
class Proposal:
    """What calibration proposes for one category (``threshold`` is ``None`` when refused)."""

    category: str
    field: str
    decisions: int
    harmful: int
    threshold: float | None
    refused: str | None = None
    """Why no threshold is proposed (too few decisions, target out of reach ...)."""
    threshold_low: float | None = None
    threshold_high: float | None = None
    """The bootstrap confidence interval of ``threshold``."""
    flagged: int = 0
    """Decisions at or above ``threshold``."""
    precision: float | None = None
    precision_low: float | None = None
    precision_high: float | None = None
    recall: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "category": self.category,
            "field": self.field,
            "decisions": self.decisions,
            "harmful": self.harmful,
            "threshold": self.threshold,
            "threshold_interval": [self.threshold_low, self.threshold_high],
            "flagged": self.flagged,
            "precision": self.precision,
            "precision_interval": [self.precision_low, self.precision_high],
            "recall": self.recall,
            "refused": self.refused,
        }


def category_score(category: str, scores: ModelScores) -> float:
    """The score the policy compares with ``category``'s flag threshold
    (``pipelines.policy``: hate, offensive = at least offensive, spam, advertisement)."""
    if category == "hate":
        return scores.toxicity[2]
    if category == "offensive":
        return min(1.0, max(0.0, 1.0 - scores.toxicity[0]))
    if category == "spam":
        return scores.intent[2]
    if category == "advertisement":
        return scores.intent[3]
    raise CalibrationError(f"category {category!r} has no model threshold to calibrate")


def wilson_interval(successes: int, total: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of the proportion ``successes / total``."""
    if total <= 0:
        raise CalibrationError("an interval needs at least one trial")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


_Floats = np.ndarray[Any, np.dtype[np.float64]]


def _choose(flagged: _Floats, harmful: _Floats, target: float) -> int | None:
    """The index of the lowest boundary whose precision reaches ``target`` (``None``: none)."""
    precision = np.where(flagged > 0, harmful / np.maximum(flagged, 1.0), 0.0)
    reaching = np.flatnonzero((flagged > 0) & (precision >= target - 1e-12))
    if reaching.size == 0:
        return None
    return int(reaching[-1])


def propose(
    category: str,
    decisions: Sequence[ReviewedScore],
    *,
    target_precision: float,
    min_decisions: int,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> Proposal:
    """The proposal for one category (see the module docstring)."""
    if not 0.0 < target_precision <= 1.0:
        raise CalibrationError("target precision must lie in (0, 1]")
    if not 0.0 < confidence < 1.0:
        raise CalibrationError("confidence must lie in (0, 1)")
    if resamples < 1 or min_decisions < 1:
        raise CalibrationError("resamples and min_decisions must be at least 1")
    field = CALIBRATED_FIELDS.get(category)
    if field is None:
        raise CalibrationError(f"category {category!r} has no model threshold to calibrate")
    n = len(decisions)
    positives = sum(1 for d in decisions if d.harmful)
    base = Proposal(category, field, n, positives, None)
    if n < min_decisions:
        return _refused(base, f"{n} decisions, fewer than the {min_decisions} required")
    if positives == 0:
        return _refused(base, "no decision found a message harmful")

    order = sorted(decisions, key=lambda d: -d.score)
    scores = np.array([d.score for d in order], dtype=np.float64)
    labels = np.array([d.harmful for d in order], dtype=np.float64)
    # A threshold between two distinct scores flags the same set as the lower one: the
    # candidates are the distinct scores, each flagging everything down to its last tie.
    last_of_tie = np.flatnonzero(np.append(scores[1:] != scores[:-1], True))
    boundary_scores = scores[last_of_tie]

    flagged = last_of_tie + 1.0
    harmful = np.cumsum(labels)[last_of_tie]
    chosen = _choose(flagged, harmful, target_precision)
    if chosen is None:
        best = float(np.max(harmful / flagged))
        return _refused(
            base, f"no threshold reaches precision {target_precision:g} (best {best:.3f})"
        )

    rng = np.random.default_rng(seed)
    picks: list[float] = []
    for _ in range(resamples):
        weights = np.bincount(rng.integers(0, n, n), minlength=n).astype(np.float64)
        w_flagged = np.cumsum(weights)[last_of_tie]
        w_harmful = np.cumsum(weights * labels)[last_of_tie]
        index = _choose(w_flagged, w_harmful, target_precision)
        picks.append(float(boundary_scores[index]) if index is not None else math.inf)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(np.array(picks), [tail, 1.0 - tail], method="inverted_cdf")

    kept = int(flagged[chosen])
    true = int(harmful[chosen])
    p_low, p_high = wilson_interval(true, kept, confidence)
    return Proposal(
        category=category,
        field=field,
        decisions=n,
        harmful=positives,
        threshold=float(boundary_scores[chosen]),
        threshold_low=float(low),
        threshold_high=float(high) if math.isfinite(high) else 1.0,
        flagged=kept,
        precision=true / kept,
        precision_low=p_low,
        precision_high=p_high,
        recall=true / positives,
    )


def _refused(base: Proposal, reason: str) -> Proposal:
    return Proposal(base.category, base.field, base.decisions, base.harmful, None, reason)


def by_category(
    rows: Sequence[tuple[str, ModelScores, bool]],
) -> Mapping[str, list[ReviewedScore]]:
    """``(category, scores, harmful)`` rows grouped into each calibrated category's decisions
    (rows of other categories are left out)."""
    grouped: dict[str, list[ReviewedScore]] = {c: [] for c in CALIBRATED_FIELDS}
    for category, scores, harmful in rows:
        if category in grouped:
            grouped[category].append(ReviewedScore(category_score(category, scores), harmful))
    return grouped
