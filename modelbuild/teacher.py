"""Teachers trained on human-labelled comments, as their packages ship them.

``HateSonar``: the ``hatesonar`` classifier (Davidson et al. tweets, TF-IDF + logistic
regression). Used twice: as a weak-supervision teacher for English toxicity and as the toxicity
baseline. Two repairs make it run on current onnxruntime: its ``StringNormalizer`` gets
``locale="C.UTF-8"`` (the default locale is missing on many machines) and its ``ZipMap`` output
is cut so the graph returns a plain probability tensor. Its classes are reordered to ours: none,
offensive, hate.

``ProfanityCheck``: ``alt-profanity-check``'s model (a calibrated linear SVM over TF-IDF, trained
on about 200,000 human-labelled comments), the probability that a text is profane. It is the
second opinion on HateSonar's offensive calls (:func:`modelbuild.datasets.toxicity_examples`).
The package ships it as joblib pickles made with the scikit-learn version it is named after
(1.9.1, the version ``pyproject.toml`` pins); they are read from the pinned wheel in the build
cache, never installed.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import helper

from modelbuild.archives import read_member

__all__ = ["HateSonar", "ProfanityCheck", "TeacherError", "clean_lines", "hatesonar_none"]

_ORDER = (2, 1, 0)  # hatesonar: 0 hate, 1 offensive, 2 neither


class HateSonar:
    """Probabilities ``[n, 3]`` in the order none, offensive, hate."""

    def __init__(self, hatesonar_wheel: Path) -> None:
        model = onnx.load_from_string(read_member(hatesonar_wheel, "hatesonar/model/model.onnx"))
        graph = model.graph
        zipmap = next(n for n in graph.node if n.op_type == "ZipMap")
        probs_name = zipmap.input[0]
        graph.node.remove(zipmap)
        for node in graph.node:
            if node.op_type == "StringNormalizer":
                node.attribute.append(helper.make_attribute("locale", "C.UTF-8"))
        del graph.output[:]
        graph.output.append(helper.make_tensor_value_info(probs_name, onnx.TensorProto.FLOAT, None))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        self._input = self._session.get_inputs()[0].name

    def predict_proba(self, texts: list[str]) -> npt.NDArray[np.float32]:
        rows = []
        for start in range(0, len(texts), 512):
            chunk = np.array(texts[start : start + 512], dtype=object)
            (probs,) = self._session.run(None, {self._input: chunk})
            rows.append(np.asarray(probs, dtype=np.float32)[:, _ORDER])
        if not rows:
            return np.zeros((0, 3), dtype=np.float32)
        return np.concatenate(rows)

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return [[float(p) for p in row] for row in self.predict_proba(texts)]


class TeacherError(RuntimeError):
    """A teacher's files cannot be read with the installed libraries."""


class ProfanityCheck:
    """``P(profane)`` ``[n]`` from alt-profanity-check's vectorizer and model."""

    def __init__(self, wheel: Path) -> None:
        import joblib
        from sklearn.exceptions import InconsistentVersionWarning

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", InconsistentVersionWarning)
                self._vectorizer = joblib.load(
                    io.BytesIO(read_member(wheel, "profanity_check/data/vectorizer.joblib"))
                )
                self._model = joblib.load(
                    io.BytesIO(read_member(wheel, "profanity_check/data/model.joblib"))
                )
        except (InconsistentVersionWarning, AttributeError, ModuleNotFoundError) as exc:
            raise TeacherError(
                f"alt-profanity-check's model does not load with this scikit-learn: {exc}"
            ) from exc

    def predict_proba(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        probs = self._model.predict_proba(self._vectorizer.transform(texts))
        return np.asarray(probs[:, 1], dtype=np.float32)

    def __call__(self, texts: list[str]) -> list[float]:
        return [float(p) for p in self.predict_proba(texts)]


def clean_lines(
    texts: list[str],
    none_of: Callable[[list[str]], npt.NDArray[np.float32]],
    profane_of: Callable[[list[str]], npt.NDArray[np.float32]],
    *,
    min_none: float = 0.5,
    max_profane: float = 0.5,
) -> frozenset[str]:
    """The texts both teachers call clean: ``none_of`` (HateSonar's ``P(none)``) at least
    ``min_none`` and ``profane_of`` (alt-profanity-check's ``P(profane)``) below
    ``max_profane``, each text read as the worker sends it (canonical). Unlabelled real lines
    become everyday training rows only when clean; the others teach the model nothing about
    toxicity or harm (:mod:`modelbuild.tuning_data`)."""
    from modelbuild.canonical_inputs import canonical_text

    if not texts:
        return frozenset()
    canonical = [canonical_text(t) for t in texts]
    none = none_of(canonical)
    profane = profane_of(canonical)
    return frozenset(
        t for t, n, p in zip(texts, none, profane, strict=True) if n >= min_none and p < max_profane
    )


def hatesonar_none(sonar: HateSonar) -> Callable[[list[str]], npt.NDArray[np.float32]]:
    """HateSonar's ``P(none)`` per text, for :func:`clean_lines`."""
    return lambda texts: sonar.predict_proba(texts)[:, 0]
