"""Heads train on embeddings, export to ONNX faithfully, and honour the row-sums-to-1 contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from modelbuild.heads import HEAD_INPUT, HEAD_OUTPUT, fit_head, save_head


def _blobs(classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (classes, 16)).astype(np.float32)
    y = rng.integers(0, classes, 600).astype(np.int64)
    x = (centres[y] + rng.normal(0, 0.3, (600, 16))).astype(np.float32)
    return x, y


@pytest.mark.parametrize("hidden", [0, 32])
def test_head_learns_separable_classes(hidden: int) -> None:
    """Linear and one-hidden-layer heads separate well-separated clusters."""
    x, y = _blobs(3)
    head = fit_head(x, y, 3, hidden=hidden, l2=1e-3, seed=1, epochs=200)
    accuracy = float((head.predict_proba(x).argmax(axis=1) == y).mean())
    assert accuracy > 0.95


@pytest.mark.parametrize("hidden", [0, 16])
def test_onnx_export_matches_numpy(hidden: int, tmp_path: Path) -> None:
    """The saved ONNX head gives the numpy head's probabilities, each row summing to 1."""
    x, y = _blobs(4, seed=2)
    head = fit_head(x, y, 4, hidden=hidden, seed=3)
    path = tmp_path / "head.onnx"
    save_head(head, "intent", path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (probs,) = session.run([HEAD_OUTPUT], {HEAD_INPUT: x[:50]})
    assert probs.shape == (50, 4)
    assert np.allclose(probs, head.predict_proba(x[:50]), atol=1e-5)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("hidden", [0, 16])
def test_class_missing_from_training_gets_no_probability(hidden: int) -> None:
    """A label never seen in training (two of three classes present) stays near zero."""
    x, y = _blobs(2, seed=4)
    head = fit_head(x, y, 3, hidden=hidden, seed=5, epochs=200)
    probs = head.predict_proba(x)
    assert probs.shape == (600, 3)
    assert float(probs[:, 2].max()) < 1e-6
    assert float((probs.argmax(axis=1) == y).mean()) > 0.95


def test_training_is_deterministic() -> None:
    """The same data and seed give the same weights (the build is reproducible)."""
    x, y = _blobs(3, seed=6)
    a = fit_head(x, y, 3, hidden=8, seed=7)
    b = fit_head(x, y, 3, hidden=8, seed=7)
    for la, lb in zip(a.layers, b.layers, strict=True):
        assert np.array_equal(la.weight, lb.weight)
        assert np.array_equal(la.bias, lb.bias)
