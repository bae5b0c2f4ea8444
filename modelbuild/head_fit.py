"""The served heads, fitted on the tuned encoder's embeddings.

The fine-tune (:mod:`modelbuild.finetune`) trains the encoder's adapters together with heads of
its own; the heads the model serves are then fitted again, by weighted logistic regression on the
finished encoder's normalised embeddings of the same rows: a softmax per task, one sigmoid per
harm (rows whose label is unknown, -1, are left out of that fit). Two reasons: the fine-tune's
heads saw each row through adapters that were still moving, and the refit is convex and
deterministic, so a heads-only round (``modstream models train --heads-only``) gives the same
heads from the same data. The heads stay uncalibrated here; :mod:`modelbuild.temperature` follows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from modelbuild.finetune import TrainExample
from modelbuild.heads import Dense, Head

__all__ = ["HEAD_L2", "fit_binary", "fit_heads"]

F32 = npt.NDArray[np.float32]
HEAD_L2 = 0.1
"""The L2 penalty (``1 / C``) of every head's logistic regression."""
_TASKS = ("sentiment", "intent", "toxicity")
Log = Callable[..., None]


def _fit(x: F32, y: npt.NDArray[np.int64], weight: F32, l2: float, seed: int) -> tuple[F32, F32]:
    """Weights ``[in, classes]`` (one column for two classes) and biases of a logistic
    regression."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2):
        model = LogisticRegression(C=1.0 / l2, tol=1e-5, max_iter=2000, random_state=seed)
        model.fit(x, y, sample_weight=weight)
    return model.coef_.T.astype(np.float32), model.intercept_.astype(np.float32)


def fit_binary(
    x: F32, y: npt.NDArray[np.int64], l2: float, seed: int, weight: F32 | None = None
) -> tuple[F32, float]:
    """A binary logistic regression: weights ``[in]`` and bias."""
    w = weight if weight is not None else np.ones(len(y), dtype=np.float32)
    coef, bias = _fit(x, y, w, l2, seed)
    return coef[:, 0].copy(), float(bias[0])


def fit_heads(
    x: F32,
    examples: Sequence[TrainExample],
    widths: Mapping[str, int],
    *,
    seed: int,
    l2: float = HEAD_L2,
    log: Log | None = None,
) -> dict[str, Head]:
    """``sentiment``, ``intent``, ``toxicity`` (softmax over ``widths[task]`` classes) and
    ``harms`` (``widths["harms"]`` sigmoids) fitted on the embeddings ``x`` of ``examples`` (row
    for row), each row weighted by its ``weight``. A task whose rows miss one of its classes is
    refused (``ValueError``): its head would have too few outputs."""
    if len(x) != len(examples):
        raise ValueError(f"{len(x)} embeddings for {len(examples)} examples")
    weight = np.array([e.weight for e in examples], dtype=np.float32)
    heads: dict[str, Head] = {}
    for task in _TASKS:
        y = np.array([getattr(e, task) for e in examples], dtype=np.int64)
        known = y >= 0
        present = np.unique(y[known]).tolist()
        if present != list(range(widths[task])):
            raise ValueError(f"{task}: the rows have classes {present}, not 0..{widths[task] - 1}")
        coef, bias = _fit(x[known], y[known], weight[known], l2, seed)
        heads[task] = Head((Dense(coef, bias),))
        if log is not None:
            log("head_fitted", head=task, rows=int(known.sum()))
    harms = widths["harms"]
    labels = np.array([e.harms for e in examples], dtype=np.float32).reshape(len(examples), harms)
    coef = np.zeros((x.shape[1], harms), dtype=np.float32)
    bias = np.zeros(harms, dtype=np.float32)
    for column in range(harms):
        known = labels[:, column] >= 0
        y = (labels[known, column] > 0).astype(np.int64)
        coef[:, column], bias[column] = fit_binary(x[known], y, l2, seed, weight[known])
    heads["harms"] = Head((Dense(coef, bias),), multilabel=True)
    if log is not None:
        log("head_fitted", head="harms", rows=int((labels >= 0).any(axis=1).sum()))
    return heads
