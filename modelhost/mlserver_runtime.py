"""An MLServer custom runtime serving a Triton Python-backend model's own ``model.py``.

MLServer (Seldon's Open Inference Protocol server) loads a runtime class named by each model's
``model-settings.json`` (``"implementation": "modelhost.mlserver_runtime.TritonPythonRuntime"``)
and passes it ``parameters.extra``: ``repository`` (a Triton model repository folder),
``model`` (a model folder in it) and ``version`` (empty: the config's default). The runtime
loads that model with :class:`~modelhost.python_backend.PythonBackendModel`, so MLServer runs
the very code Triton runs, and the worker's Triton client (KServe v2 gRPC) talks to either.

Requests: one ``BYTES`` input of shape ``[n, 1]`` (the model's input name), as the worker
sends it. A request the model refuses (an error response) is answered ``INVALID_ARGUMENT``
(MLServer's ``MLServerError`` with HTTP 400), as Triton answers it; a request of another shape
too. Calls run one at a time on a worker thread, off MLServer's event loop.

``stack.mlserver`` writes the settings for every version of every Python-backend model of a
repository and starts the server (in its own virtual environment, ``.venv-mlserver``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import MLServerError
from mlserver.types import InferenceRequest, InferenceResponse

from modelhost.python_backend import ModelHostError, PythonBackendModel

__all__ = ["TritonPythonRuntime"]


def _texts(payload: InferenceRequest, input_name: str) -> list[str]:
    if len(payload.inputs) != 1 or payload.inputs[0].name != input_name:
        raise MLServerError(f"expected one input named {input_name!r}")
    tensor = payload.inputs[0]
    if tensor.datatype != "BYTES":
        raise MLServerError(f"{input_name} must be BYTES, got {tensor.datatype}")
    items = tensor.data.root if hasattr(tensor.data, "root") else tensor.data
    values = list(items)
    if len(tensor.shape) != 2 or tensor.shape[1] != 1 or tensor.shape[0] != len(values):
        raise MLServerError(f"{input_name} must have shape [n, 1], got {tensor.shape}")
    return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v) for v in values]


class TritonPythonRuntime(MLModel):  # type: ignore[misc]  # mlserver has no type information
    """One version of one Python-backend model (see the module docstring)."""

    async def load(self) -> bool:
        extra: dict[str, Any] = dict(self.settings.parameters.extra or {})
        repository = Path(str(extra["repository"]))
        name = str(extra.get("model", self.name))
        version = str(extra.get("version", ""))
        self._lock = asyncio.Lock()
        try:
            self._model = await asyncio.to_thread(PythonBackendModel, repository, name, version)
        except ModelHostError as exc:
            raise MLServerError(str(exc), status_code=500) from exc
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        texts = _texts(payload, self._model.input_name)
        async with self._lock:
            try:
                outputs = await asyncio.to_thread(self._model.infer, texts)
            except ModelHostError as exc:
                raise MLServerError(str(exc)) from exc
        return InferenceResponse(
            model_name=self.name,
            model_version=self._model.version,
            outputs=[
                NumpyCodec.encode_output(name, np.ascontiguousarray(array))
                for name, array in outputs.items()
            ],
        )

    async def unload(self) -> bool:
        await asyncio.to_thread(self._model.close)
        return True
