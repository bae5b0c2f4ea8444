"""Triton Python-backend model that runs ``model.onnx`` (beside it) with onnxruntime.

``modstream models build`` copies this file as ``model.py`` into every ONNX model's version folder
(encoder and heads), so one reviewed source serves them all. Triton's tensor names are the ONNX
graph's input and output names. All requests of a dynamic batch are concatenated and run as one
onnxruntime call, then split back per request.

Execution provider: CUDA when the instance is a GPU instance and onnxruntime has the CUDA
provider, CPU otherwise. Intra-op threads: the config parameter ``intra_op_threads`` if set, else
the machine's CPU count divided by the model's instance count (at least 1).
If the graph takes ``attention_mask``, columns that are padding in every row of the batch are
dropped before the run: padding is masked out anyway, so the result is the same and short chat
messages do not pay for the fixed tokenizer length.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils

__all__ = ["TritonPythonModel"]

_MASK_INPUT = "attention_mask"


def _threads(config: dict[str, Any]) -> int:
    params = config.get("parameters", {})
    if "intra_op_threads" in params:
        return max(1, int(params["intra_op_threads"]["string_value"]))
    instances = sum(int(g.get("count", 1)) for g in config.get("instance_group", [])) or 1
    return max(1, (os.cpu_count() or 1) // instances)


class TritonPythonModel:
    """Loads the ONNX file once per instance; ``execute`` runs a whole dynamic batch."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        folder = Path(args["model_repository"]) / args["model_version"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = _threads(config)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers: list[Any] = ["CPUExecutionProvider"]
        if (
            args.get("model_instance_kind") == "GPU"
            and "CUDAExecutionProvider" in ort.get_available_providers()
        ):
            device = int(args.get("model_instance_device_id", "0"))
            providers = [("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]
        self._session = ort.InferenceSession(
            str(folder / "model.onnx"), options, providers=providers
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._outputs = [o["name"] for o in config["output"]]
        self._types = {
            o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]
        }

    def execute(self, requests: list[Any]) -> list[Any]:
        feeds: dict[str, list[np.ndarray[Any, Any]]] = {name: [] for name in self._inputs}
        sizes: list[int] = []
        for request in requests:
            for name in self._inputs:
                feeds[name].append(pb_utils.get_input_tensor_by_name(request, name).as_numpy())
            sizes.append(len(feeds[self._inputs[0]][-1]))
        batch = {name: np.concatenate(parts) for name, parts in feeds.items()}
        if _MASK_INPUT in batch:
            batch = _trim_padding(batch)
        results = self._session.run(self._outputs, batch)
        responses = []
        start = 0
        for size in sizes:
            tensors = [
                pb_utils.Tensor(name, result[start : start + size].astype(self._types[name]))
                for name, result in zip(self._outputs, results, strict=True)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses

    def finalize(self) -> None:
        del self._session


def _trim_padding(
    batch: dict[str, np.ndarray[Any, Any]],
) -> dict[str, np.ndarray[Any, Any]]:
    mask = batch[_MASK_INPUT]
    used = np.flatnonzero(mask.any(axis=0))
    length = int(used[-1]) + 1 if used.size else 1
    return {
        name: (value[:, :length] if value.shape == mask.shape else value)
        for name, value in batch.items()
    }
