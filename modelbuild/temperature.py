"""Temperature scaling: one number per head that makes its probabilities honest.

A head's logits are divided by ``T``, chosen to minimise the negative log-likelihood of
held-out examples (Guo et al., "On Calibration of Modern Neural Networks", 2017). ``T`` does not
change which class ranks first, only how sure the head says it is, so a threshold such as 0.95
means the same across heads. The search is a golden-section search over ``log T`` in
``[log 0.05, log 20]``: deterministic and dependency-free.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from modelbuild.heads import Dense, Head

__all__ = ["fit_temperature", "logits_of", "scaled"]

F32 = npt.NDArray[np.float32]
_LOW, _HIGH = math.log(0.05), math.log(20.0)
_STEPS = 60


def logits_of(head: Head, x: F32) -> F32:
    """The head's last-layer logits for inputs ``x``."""
    h = x.astype(np.float32)
    for i, layer in enumerate(head.layers):
        h = h @ layer.weight + layer.bias
        if i < len(head.layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def _nll(
    logits: npt.NDArray[np.float64], target: npt.NDArray[np.float64], multilabel: bool
) -> float:
    if multilabel:
        known = target >= 0
        z = logits[known]
        t = target[known]
        # log(1 + e^-|z|) + max(z, 0) - z t: the stable binary cross-entropy
        return float(np.mean(np.logaddexp(0.0, z) - z * t))
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(len(target))
    return float(-np.mean(log_p[rows, target.astype(np.int64)]))


def fit_temperature(logits: F32, target: npt.NDArray[np.generic], *, multilabel: bool) -> float:
    """The ``T`` that minimises the held-out NLL of ``logits / T``. ``target`` holds class
    indices (softmax) or 0/1/-1 per output (multilabel, -1 unknown)."""
    z = logits.astype(np.float64)
    t = np.asarray(target, dtype=np.float64)
    if len(z) == 0:
        return 1.0

    def loss(log_t: float) -> float:
        return _nll(z / math.exp(log_t), t, multilabel)

    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = _LOW, _HIGH
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(_STEPS):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return math.exp((a + b) / 2.0)


def scaled(head: Head, temperature: float) -> Head:
    """``head`` with its last layer divided by ``temperature`` (the same ranking)."""
    last = head.layers[-1]
    factor = np.float32(1.0 / temperature)
    new_last = Dense(
        (last.weight * factor).astype(np.float32), (last.bias * factor).astype(np.float32)
    )
    return Head((*head.layers[:-1], new_last), head.multilabel)
