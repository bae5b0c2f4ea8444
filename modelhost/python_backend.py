"""A Triton Python-backend model's own ``model.py``, loaded and called outside Triton.

:class:`PythonBackendModel` reads a model folder of a Triton repository (``config.pbtxt``, a
version folder holding ``model.py``), imports that ``model.py`` with
:mod:`modelhost.triton_utils` standing in for ``triton_python_backend_utils``, and calls its
``TritonPythonModel`` as Triton does: ``initialize(args)`` once with the arguments Triton passes
(``model_config`` as JSON, the model folder as ``model_repository``, ``model_version``,
``model_instance_kind`` ...), then ``execute([request])`` per call, ``finalize()`` at the end. So
the worker's ``inprocess`` backend and the MLServer runtime run the very file Triton serves (the
moderation model's ``model.py``: tokenizer, ONNX Runtime encoder, heads; or the test fixture's).

Which version: ``version`` names one (``"1"``); empty means what Triton would serve by default,
the highest version the config's ``version_policy`` serves (``latest`` by default, one version).

One instance is not safe to call from two threads at once (Triton never does): callers run one
call at a time per instance (``engine.inprocess``, ``modelhost.mlserver_runtime``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from modelhost import triton_utils
from modelhost.errors import ModelHostError
from modelhost.pbtxt import PbtxtError, read_model_config

__all__ = [
    "ModelFailed",
    "ModelHostError",
    "ModelLoadError",
    "ModelRefused",
    "PythonBackendModel",
    "served_versions",
]

_UTILS = "triton_python_backend_utils"


class ModelLoadError(ModelHostError):
    """The model folder, its config, the version asked for or its ``initialize`` failed."""


class ModelRefused(ModelHostError):
    """The model answered with an error response instead of outputs (``TritonError``)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class ModelFailed(ModelHostError):
    """The model's ``execute`` raised, or answered in a shape Triton would refuse."""


def served_versions(folder: Path, config: dict[str, Any]) -> list[str]:
    """The versions Triton would serve from ``folder`` under the config's ``version_policy``,
    lowest first: numeric sub-folders, filtered by ``specific``, ``latest`` (default: one) or
    ``all``."""
    on_disk = sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())
    policy = config.get("version_policy") or {"latest": {"num_versions": 1}}
    if "all" in policy:
        chosen = on_disk
    elif "specific" in policy:
        wanted = {int(v) for v in policy["specific"].get("versions", [])}
        chosen = [v for v in on_disk if v in wanted]
    else:
        count = int((policy.get("latest") or {}).get("num_versions", 1))
        chosen = on_disk[-count:] if count > 0 else []
    return [str(v) for v in chosen]


def _install_utils() -> None:
    """Make ``import triton_python_backend_utils`` find :mod:`modelhost.triton_utils` (unless
    the real one is already loaded, as inside Triton's stub)."""
    sys.modules.setdefault(_UTILS, triton_utils)


def _import_model(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # A module is in sys.modules while it runs, as any import does (dataclasses look it up).
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ModelLoadError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    return module


class PythonBackendModel:
    """One instance of model ``name`` (version ``version``, empty: the default) of the Triton
    repository ``repository``, loaded at construction (``ModelLoadError`` if it cannot be)."""

    def __init__(
        self,
        repository: Path,
        name: str,
        version: str = "",
        *,
        instance: int = 0,
        instance_kind: str = "CPU",
    ) -> None:
        folder = repository / name
        config_path = folder / "config.pbtxt"
        if not config_path.is_file():
            raise ModelLoadError(f"no model {name!r} in {repository} (no {config_path.name})")
        try:
            self.config = read_model_config(config_path)
        except PbtxtError as exc:
            raise ModelLoadError(str(exc)) from exc
        if self.config.get("backend") != "python":
            raise ModelLoadError(f"{name}: not a Python-backend model ({config_path})")
        served = served_versions(folder, self.config)
        if not served:
            raise ModelLoadError(f"{name}: no version to serve in {folder}")
        if version and version not in served:
            raise ModelLoadError(f"{name}: version {version} not served (serves {served})")
        self.name = name
        self.version = version or served[-1]
        """The version loaded (the default one when none was asked for)."""
        self.versions = served
        """Every version the config serves (what ``version=""`` chose among)."""
        inputs = self.config.get("input", [])
        if len(inputs) != 1:
            raise ModelLoadError(f"{name}: one input expected, the config has {len(inputs)}")
        self.input_name = str(inputs[0]["name"])
        self.output_names = [str(o["name"]) for o in self.config.get("output", [])]
        source = folder / self.version / "model.py"
        if not source.is_file():
            raise ModelLoadError(f"{name}: version {self.version} has no model.py ({source})")
        _install_utils()
        module_name = f"_modelhost_{name}_{self.version}_{instance}_{id(self):x}"
        module = _import_model(source, module_name)
        self._module_name = module_name
        args = {
            "model_config": json.dumps(self.config),
            "model_instance_kind": instance_kind,
            "model_instance_name": f"{name}_{instance}",
            "model_instance_device_id": "0",
            "model_repository": str(folder),
            "model_version": self.version,
            "model_name": name,
        }
        try:
            self._model: Any = module.TritonPythonModel()
            if hasattr(self._model, "initialize"):
                self._model.initialize(args)
        except Exception as exc:
            sys.modules.pop(module_name, None)
            raise ModelLoadError(
                f"{name} version {self.version}: initialize failed: {type(exc).__name__}: {exc}"
            ) from exc

    def infer(self, texts: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
        """One ``execute`` call for ``texts`` (shape ``[n, 1]``, UTF-8 bytes, as Triton's
        client sends them): the array of each output the config declares and the model gave,
        ``n`` rows. A declared output the model did not give is left out, as Triton's response
        leaves it out (a version of a model may not have every output its config names; the
        caller decides which it needs). ``ModelRefused`` when the model answers with an error,
        ``ModelFailed`` when it raises or answers malformed."""
        data = np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_).reshape(-1, 1)
        request = triton_utils.InferenceRequest(
            [triton_utils.Tensor(self.input_name, data)], self.output_names
        )
        try:
            responses = self._model.execute([request])
        except Exception as exc:
            raise ModelFailed(f"{self.name}: execute raised {type(exc).__name__}") from exc
        if not isinstance(responses, list) or len(responses) != 1:
            raise ModelFailed(f"{self.name}: execute must answer one response per request")
        response = responses[0]
        error = response.error()
        if error is not None:
            raise ModelRefused(str(error.message()), int(error.code()))
        outputs = {t.name(): np.asarray(t.as_numpy()) for t in response.output_tensors()}
        return {name: outputs[name] for name in self.output_names if name in outputs}

    def close(self) -> None:
        """``finalize()`` (when the model has one); the instance is not used again."""
        try:
            if hasattr(self._model, "finalize"):
                self._model.finalize()
        finally:
            sys.modules.pop(self._module_name, None)
