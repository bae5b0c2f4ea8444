"""What a head reads, for training and evaluation: the matrices the serving model feeds it.

An ``embedding`` head reads the encoder's 384-wide embedding; a ``features`` head reads the
encoder's multi-layer ``features`` followed by VADER's four lexicon scores of the raw text,
computed by the very function the serving model uses
(:func:`modelbuild.serving.pipeline_model.lexicon_scores`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from modelbuild.embedding import Embedder
from modelbuild.heads import HEAD_FEATURES_INPUT, HEAD_INPUT
from modelbuild.serving.pipeline_model import lexicon_scores

__all__ = ["HeadInputs"]

F32 = npt.NDArray[np.float32]


class HeadInputs:
    """Builds a head's input matrix for a list of texts (encoder outputs cached by ``embedder``)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._analyzer: Any = None

    def matrix(self, input_name: str, texts: list[str]) -> F32:
        if input_name == HEAD_INPUT:
            return self._embedder.embed(texts)
        if input_name == HEAD_FEATURES_INPUT:
            if self._analyzer is None:
                from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

                self._analyzer = SentimentIntensityAnalyzer()
            lexicon = lexicon_scores(self._analyzer, texts)
            return np.hstack([self._embedder.features(texts), lexicon]).astype(np.float32)
        raise ValueError(f"unknown head input {input_name!r}")
