"""Classification heads on top of sentence embeddings: training, numpy inference, ONNX export.

A head is a stack of dense layers (ReLU between them) ending in a softmax, or, for a
``multilabel`` head (the harm outputs), in one independent sigmoid per output. Training uses
scikit-learn's multinomial logistic regression (L-BFGS, deterministic) for linear heads and its
``MLPClassifier`` with a fixed seed for one-hidden-layer heads; the learned matrices are written
into a tiny ONNX graph ``embedding -> probabilities`` by hand.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "HEAD_FEATURES_INPUT",
    "HEAD_INPUT",
    "HEAD_OUTPUT",
    "Dense",
    "Head",
    "fit_head",
    "head_to_onnx",
    "save_head",
]

F32 = npt.NDArray[np.float32]
HEAD_INPUT = "embedding"
HEAD_FEATURES_INPUT = "features"
"""Input name of heads that read the encoder's multi-layer features and the lexicon scores."""
HEAD_OUTPUT = "probabilities"
_OPSET = 18


@dataclass(frozen=True, slots=True)
class Dense:
    """``y = x @ weight + bias``; ``weight`` is ``[in, out]``."""

    weight: F32
    bias: F32


@dataclass(frozen=True, slots=True)
class Head:
    """Dense layers with ReLU between them and a softmax at the end (a sigmoid per output when
    ``multilabel``)."""

    layers: tuple[Dense, ...]
    multilabel: bool = False

    @property
    def classes(self) -> int:
        return int(self.layers[-1].bias.shape[0])

    def predict_proba(self, x: F32) -> F32:
        """Probabilities ``[n, classes]`` for embeddings ``[n, in]``."""
        h = x.astype(np.float32)
        for i, layer in enumerate(self.layers):
            h = h @ layer.weight + layer.bias
            if i < len(self.layers) - 1:
                h = np.maximum(h, 0.0)
        if self.multilabel:
            sig: F32 = (1.0 / (1.0 + np.exp(-h))).astype(np.float32)
            return sig
        h = h - h.max(axis=1, keepdims=True)
        e = np.exp(h)
        out: F32 = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        return out


def fit_head(
    x: F32,
    y: npt.NDArray[np.int64],
    classes: int,
    *,
    hidden: int = 0,
    l2: float = 1.0,
    seed: int = 0,
    balanced: bool = True,
    epochs: int = 25,
) -> Head:
    """Train a head; ``hidden == 0`` gives logistic regression, otherwise one hidden layer."""
    from threadpoolctl import threadpool_limits

    # One BLAS thread: multi-threaded reductions change the last float bits from run to run and
    # machine to machine, and the optimiser would carry that into the weights.
    with threadpool_limits(limits=1):
        return _fit(
            x, y, classes, hidden=hidden, l2=l2, seed=seed, balanced=balanced, epochs=epochs
        )


def _fit(
    x: F32,
    y: npt.NDArray[np.int64],
    classes: int,
    *,
    hidden: int,
    l2: float,
    seed: int,
    balanced: bool,
    epochs: int,
) -> Head:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    present = np.unique(y)
    if hidden == 0:
        lr = LogisticRegression(
            C=1.0 / l2,
            # A tight tolerance reaches the (unique) optimum, so embeddings that differ in the
            # last float bits give the same head; the default stops on a flat ridge.
            tol=1e-8,
            max_iter=5000,
            class_weight="balanced" if balanced else None,
            random_state=seed,
        )
        lr.fit(x, y)
        weight = np.zeros((x.shape[1], classes), dtype=np.float32)
        bias = np.full(classes, -30.0, dtype=np.float32)  # classes never seen stay near 0
        coef = lr.coef_.astype(np.float32)
        intercept = lr.intercept_.astype(np.float32)
        if len(present) == 2:  # scikit-learn keeps one row for two classes
            coef = np.stack([-coef[0] / 2, coef[0] / 2])
            intercept = np.array([-intercept[0] / 2, intercept[0] / 2], dtype=np.float32)
        for row, cls in enumerate(lr.classes_):
            weight[:, int(cls)] = coef[row]
            bias[int(cls)] = intercept[row]
        return Head((Dense(weight, bias),))
    if balanced:
        x, y = _oversample(x, y, seed)
    mlp = MLPClassifier(
        hidden_layer_sizes=(hidden,),
        alpha=l2,
        batch_size=512,
        max_iter=epochs,
        random_state=seed,
    )
    with warnings.catch_warnings():
        # A fixed epoch budget is the point (build time); not converging fully is expected.
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.fit(x, y)
    first = Dense(mlp.coefs_[0].astype(np.float32), mlp.intercepts_[0].astype(np.float32))
    out_w = np.zeros((hidden, classes), dtype=np.float32)
    out_b = np.full(classes, -30.0, dtype=np.float32)
    last_w = mlp.coefs_[1].astype(np.float32)
    last_b = mlp.intercepts_[1].astype(np.float32)
    if len(mlp.classes_) == 2:  # logistic output unit: turn into a two-way softmax
        last_w = np.concatenate([-last_w / 2, last_w / 2], axis=1)
        last_b = np.array([-last_b[0] / 2, last_b[0] / 2], dtype=np.float32)
    for col, cls in enumerate(mlp.classes_):
        out_w[:, int(cls)] = last_w[:, col]
        out_b[int(cls)] = last_b[col]
    return Head((first, Dense(out_w, out_b)))


def _oversample(x: F32, y: npt.NDArray[np.int64], seed: int) -> tuple[F32, npt.NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    counts = np.bincount(y)
    target = int(counts.max())
    idx: list[npt.NDArray[np.int64]] = []
    for cls, count in enumerate(counts):
        if count == 0:
            continue
        members = np.flatnonzero(y == cls)
        idx.append(members)
        if count < target:
            idx.append(rng.choice(members, size=target - count, replace=True))
    order = rng.permutation(np.concatenate(idx))
    return x[order], y[order]


def head_to_onnx(head: Head, name: str, input_name: str = HEAD_INPUT) -> onnx.ModelProto:
    """The head as an ONNX graph ``<input_name> [n, in] -> probabilities [n, classes]``."""
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    current = input_name
    for i, layer in enumerate(head.layers):
        w, b = f"dense{i}.weight", f"dense{i}.bias"
        inits += [numpy_helper.from_array(layer.weight, w), numpy_helper.from_array(layer.bias, b)]
        nodes.append(helper.make_node("MatMul", [current, w], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", b], [f"logits{i}"]))
        current = f"logits{i}"
        if i < len(head.layers) - 1:
            nodes.append(helper.make_node("Relu", [current], [f"relu{i}"]))
            current = f"relu{i}"
    if head.multilabel:
        nodes.append(helper.make_node("Sigmoid", [current], [HEAD_OUTPUT]))
    else:
        nodes.append(helper.make_node("Softmax", [current], [HEAD_OUTPUT], axis=-1))
    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info(
                input_name, TensorProto.FLOAT, ["batch", head.layers[0].weight.shape[0]]
            )
        ],
        [helper.make_tensor_value_info(HEAD_OUTPUT, TensorProto.FLOAT, ["batch", head.classes])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="modelbuild"
    )
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def save_head(head: Head, name: str, path: Path, input_name: str = HEAD_INPUT) -> None:
    """Write the head's ONNX file (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(head_to_onnx(head, name, input_name).SerializeToString())
    tmp.replace(path)
