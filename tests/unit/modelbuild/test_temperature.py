"""Temperature scaling finds the temperature that generated the labels and keeps the ranking."""

from __future__ import annotations

import numpy as np

from modelbuild.heads import Dense, Head
from modelbuild.temperature import fit_temperature, logits_of, scaled


def test_recovers_a_softmax_temperature() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (6000, 3)).astype(np.float32)
    true_t = 2.5
    p = np.exp(logits / true_t)
    p /= p.sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(3, p=row) for row in p])
    assert abs(fit_temperature(logits, labels, multilabel=False) - true_t) < 0.25


def test_recovers_a_sigmoid_temperature_ignoring_unknowns() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 4, (8000, 1)).astype(np.float32)
    labels = (rng.random((8000, 1)) < 1 / (1 + np.exp(-logits / 0.5))).astype(np.float32)
    labels[:2000] = -1.0  # unknown rows add nothing
    assert abs(fit_temperature(logits, labels, multilabel=True) - 0.5) < 0.07


def test_scaling_keeps_the_ranking_and_sigmoid_heads() -> None:
    rng = np.random.default_rng(2)
    head = Head((Dense(rng.normal(size=(4, 3)).astype(np.float32), np.zeros(3, np.float32)),))
    x = rng.normal(size=(50, 4)).astype(np.float32)
    cooler = scaled(head, 3.0)
    np.testing.assert_array_equal(
        head.predict_proba(x).argmax(axis=1), cooler.predict_proba(x).argmax(axis=1)
    )
    np.testing.assert_allclose(logits_of(cooler, x), logits_of(head, x) / 3.0, rtol=1e-5)
    multi = Head(head.layers, multilabel=True)
    assert scaled(multi, 2.0).multilabel
    probs = multi.predict_proba(x)
    assert np.all((probs > 0) & (probs < 1))
    assert not np.allclose(probs.sum(axis=1), 1.0)
