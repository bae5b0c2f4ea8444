"""Classification metrics written out plainly: per-class precision / recall / F1, macro-F1,
accuracy, confusion matrix, and the false-positive rate on a set that should all be negative."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["classification_report", "false_positive_rate"]

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
