"""The served heads refitted on embeddings: each task learns from the rows that label it,
weights count, and a task missing a class is refused."""

from __future__ import annotations

import numpy as np
import pytest

from modelbuild.finetune import TrainExample
from modelbuild.head_fit import fit_binary, fit_heads

WIDTHS = {"sentiment": 3, "intent": 4, "toxicity": 3, "harms": 2}


def _data(n: int = 240) -> tuple[np.ndarray, list[TrainExample]]:
    """Embeddings whose first axes carry each label; harm 1 is unknown on half the rows."""
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 0.1, size=(n, 8)).astype(np.float32)
    examples = []
    for i in range(n):
        sentiment, intent, toxicity, harm = i % 3, i % 4, (i // 3) % 3, (i // 2) % 2
        x[i, sentiment] += 2.0
        x[i, 3 + intent] += 2.0 if intent else 0.0
        x[i, 7] += 2.0 * harm
        examples.append(
            TrainExample(
                f"row {i}",
                sentiment if i % 5 else -1,
                intent,
                toxicity,
                (float(harm), -1.0 if i % 2 else float(harm)),
            )
        )
    return x, examples


def test_each_task_learns_its_labels() -> None:
    x, examples = _data()
    heads = fit_heads(x, examples, WIDTHS, seed=1)
    assert {k: h.classes for k, h in heads.items()} == WIDTHS
    intent = heads["intent"].predict_proba(x).argmax(axis=1)
    assert (intent == np.array([e.intent for e in examples])).mean() > 0.95
    harms = heads["harms"].predict_proba(x)
    assert heads["harms"].multilabel
    truth = np.array([e.harms[0] for e in examples])
    assert ((harms[:, 0] > 0.5) == (truth > 0)).mean() > 0.95


def test_a_task_missing_a_class_is_refused() -> None:
    x, examples = _data()
    no_hate = [
        TrainExample(e.text, e.sentiment, e.intent, min(e.toxicity, 1), e.harms) for e in examples
    ]
    with pytest.raises(ValueError, match="toxicity"):
        fit_heads(x, no_hate, WIDTHS, seed=1)
    with pytest.raises(ValueError, match="embeddings"):
        fit_heads(x[:10], examples, WIDTHS, seed=1)


def test_row_weights_decide_a_conflict() -> None:
    """The same point labelled both ways: the heavier label wins."""
    x = np.array([[1.0, 0.0]] * 2 + [[0.0, 1.0]] * 2, dtype=np.float32)
    y = np.array([1, 0, 0, 1], dtype=np.int64)
    for heavy, expected in ((np.array([5.0, 1.0, 5.0, 1.0]), 1), (np.array([1, 5, 1, 5.0]), 0)):
        w, b = fit_binary(x, y, 0.01, 1, heavy.astype(np.float32))
        assert int(float(x[0] @ w + b) > 0) == expected
