"""Triton Python-backend model: raw chat text in, fixed-length XLM-R token ids out.

``modstream models build`` copies this file as ``tokenizer/<version>/model.py`` next to the
``tokenizer.json`` it loads. Config parameters: ``max_length`` (padding and truncation length, so
every row has the same shape and the dynamic batcher can merge requests) and ``prefix`` (e5's
``"query: "`` convention). Bytes that are not valid UTF-8 are replaced, never rejected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer

__all__ = ["TritonPythonModel"]

_PAD_ID = 1
_PAD_TOKEN = "<pad>"  # noqa: S105 - a vocabulary entry, not a secret


class TritonPythonModel:
    """One tokenizer per instance; ``execute`` encodes every request of a batch in one call."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self._prefix = params.get("prefix", "query: ")
        length = int(params.get("max_length", "64"))
        folder = Path(args["model_repository"]) / args["model_version"]
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=length)
        tokenizer.enable_padding(pad_id=_PAD_ID, pad_token=_PAD_TOKEN, length=length)
        self._tokenizer = tokenizer

    def execute(self, requests: list[Any]) -> list[Any]:
        texts: list[str] = []
        sizes: list[int] = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            sizes.append(len(raw))
            texts.extend(self._prefix + _as_text(item) for item in raw)
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        responses = []
        start = 0
        for size in sizes:
            end = start + size
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("input_ids", ids[start:end]),
                        pb_utils.Tensor("attention_mask", mask[start:end]),
                    ]
                )
            )
            start = end
        return responses


def _as_text(item: object) -> str:
    if isinstance(item, bytes):
        return item.decode("utf-8", errors="replace")
    return str(item)
