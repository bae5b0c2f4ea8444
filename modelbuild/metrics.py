"""Classification metrics written out plainly: per-class precision / recall / F1, macro-F1,
accuracy, confusion matrix, the false-positive rate on a set that should all be negative, and
binary detection metrics (precision, recall, F1, false-positive rate and the area under the
precision-recall curve) of a harmful / benign decision with a score."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["average_precision", "classification_report", "detection_metrics", "false_positive_rate"]

Ints = npt.NDArray[np.int64]


def classification_report(
    y_true: Ints, y_pred: Ints, labels: Sequence[str], present_only: bool = True
) -> dict[str, object]:
    """Metrics for integer labels ``0 .. len(labels) - 1``.

    Macro-F1 averages over the classes present in ``y_true`` when ``present_only`` (a test set
    without a class cannot score it), else over every class.
    """
    k = len(labels)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (y_true, y_pred), 1)
    per_class: dict[str, dict[str, float]] = {}
    f1s = []
    for i, name in enumerate(labels):
        tp = float(confusion[i, i])
        predicted = float(confusion[:, i].sum())
        actual = float(confusion[i, :].sum())
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[name] = {
            "precision": round(precision, 4),
            "recall": round(recall, 4),
            "f1": round(f1, 4),
            "support": int(actual),
        }
        if actual or not present_only:
            f1s.append(f1)
    total = int(confusion.sum())
    return {
        "n": total,
        "accuracy": round(float(np.trace(confusion)) / total, 4) if total else 0.0,
        "macro_f1": round(float(np.mean(f1s)), 4) if f1s else 0.0,
        "per_class": per_class,
        "confusion": confusion.tolist(),
    }


def false_positive_rate(y_pred: Ints, negative_labels: Sequence[int]) -> float:
    """Share of predictions outside ``negative_labels`` on a set whose truth is all negative."""
    if len(y_pred) == 0:
        return 0.0
    flagged = ~np.isin(y_pred, np.asarray(negative_labels))
    return round(float(flagged.mean()), 4)


def average_precision(positive: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the precision-recall curve as average precision: the precision at each
    distinct score threshold (highest first), weighted by the recall it adds; tied scores enter
    together. ``None`` without positives."""
    if len(positive) != len(scores):
        raise ValueError(f"{len(positive)} labels but {len(scores)} scores")
    total = sum(positive)
    if not total:
        return None
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    area, tp, seen, recall = 0.0, 0, 0, 0.0
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and scores[order[j]] == scores[order[i]]:
            tp += bool(positive[order[j]])
            j += 1
        seen += j - i
        new_recall = tp / total
        area += (new_recall - recall) * (tp / seen)
        recall = new_recall
        i = j
    return round(area, 4)


def detection_metrics(
    positive: Sequence[bool], caught: Sequence[bool], scores: Sequence[float]
) -> dict[str, float | int | None]:
    """Precision, recall, F1 and false-positive rate of ``caught`` against ``positive``, and
    the AUPRC of ``scores``; rounded to 4 decimals. Precision is ``None`` when nothing is
    caught, the false-positive rate ``None`` without negatives."""
    if not len(positive) == len(caught) == len(scores):
        raise ValueError("positive, caught and scores must have one entry per line")
    tp = sum(1 for p, c in zip(positive, caught, strict=True) if p and c)
    fp = sum(1 for p, c in zip(positive, caught, strict=True) if c and not p)
    pos = sum(1 for p in positive if p)
    neg = len(positive) - pos
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / pos if pos else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall
        else 0.0
    )

    def _r(value: float | None) -> float | None:
        return round(value, 4) if value is not None else None

    return {
        "n_harmful": pos,
        "n_benign": neg,
        "precision": _r(precision),
        "recall": _r(recall),
        "f1": round(f1, 4),
        "fpr": _r(fp / neg) if neg else None,
        "auprc": average_precision(positive, scores),
    }
