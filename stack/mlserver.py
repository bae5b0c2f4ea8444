"""MLServer for the local stack: a second Open Inference Protocol server over the same models.

``MLServer`` (Seldon's, PyPI ``mlserver``) speaks the same KServe v2 gRPC protocol as Triton, so
the worker's Triton client talks to it unchanged. It runs the model repository's own
Python-backend code through the custom runtime ``modelhost.mlserver_runtime``: every model whose
one input is ``TYPE_STRING`` (the moderation models; the fixture's in tests) is served, each
version its config serves under the same name, the highest the default (as Triton's latest).

The server runs from its own virtual environment, ``.venv-mlserver`` (``scripts/bootstrap.sh``
makes it from ``requirements/mlserver.lock``; it is never created here): MLServer pins a fastapi
older than the review service's. modstream's ``modelhost`` package reaches it through
``PYTHONPATH`` (the checkout), nothing else of modstream does.

``MODSTREAM_STACK__INFERENCE_SERVER=mlserver modstream stack up`` serves the repository with
MLServer on Triton's ports (``triton_grpc_port`` ...); :func:`private_mlserver` starts one of
its own on other ports (the tests).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common.settings import project_root
from modelhost.pbtxt import PbtxtError, read_model_config
from modelhost.python_backend import served_versions
from stack.errors import NoModelsError, ToolMissingError
from stack.inference_server import InferenceServer
from stack.settings import StackSettings

__all__ = [
    "MLSERVER_VENV",
    "RUNTIME",
    "MLServerServer",
    "private_mlserver",
    "text_models",
    "write_settings",
]

MLSERVER_VENV = project_root() / ".venv-mlserver"
"""MLServer's virtual environment (made by ``scripts/bootstrap.sh``)."""
RUNTIME = "modelhost.mlserver_runtime.TritonPythonRuntime"


def text_models(repository: Path) -> dict[str, list[str]]:
    """The Python-backend models of ``repository`` that take one ``TYPE_STRING`` input, each
    with the versions its config serves."""
    found: dict[str, list[str]] = {}
    for config_path in sorted(repository.glob("*/config.pbtxt")):
        try:
            config = read_model_config(config_path)
        except PbtxtError:
            continue  # Triton would refuse it too; it is not ours to serve
        inputs = config.get("input", [])
        if config.get("backend") != "python" or len(inputs) != 1:
            continue
        if inputs[0].get("data_type") != "TYPE_STRING":
            continue
        versions = served_versions(config_path.parent, config)
        if versions:
            found[config_path.parent.name] = versions
    return found


_DATATYPES = {
    "TYPE_STRING": "BYTES",
    "TYPE_FP32": "FP32",
    "TYPE_FP64": "FP64",
    "TYPE_INT64": "INT64",
}
"""Triton's config data types as the protocol's metadata names them."""


def _tensors(config: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The config's inputs or outputs as MLServer metadata (``[-1, *dims]`` when batched)."""
    batch = [-1] if int(config.get("max_batch_size", 0)) > 0 else []
    return [
        {
            "name": str(t["name"]),
            "datatype": _DATATYPES.get(str(t["data_type"]), str(t["data_type"])),
            "shape": [*batch, *(int(d) for d in t.get("dims", []))],
        }
        for t in config.get(kind, [])
    ]


def write_settings(
    repository: Path, folder: Path, ports: tuple[int, int, int], host: str = "127.0.0.1"
) -> dict[str, list[str]]:
    """MLServer's ``settings.json`` (on ``host``, a loopback address; ``ports`` = HTTP, gRPC,
    metrics; inference in the server process) and one ``model-settings.json`` per served
    version under ``folder`` (replaced whole); returns the models and versions written."""
    models = text_models(repository)
    configs = {name: read_model_config(repository / name / "config.pbtxt") for name in models}
    if not models:
        raise NoModelsError(f"{repository} holds no Python-backend model with one text input")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    http, grpc, metrics = ports
    server = {
        "host": host,
        "http_port": http,
        "grpc_port": grpc,
        "metrics_port": metrics,
        # Inference in the server's own process (its worker pool would start more of them).
        "parallel_workers": 0,
        "debug": False,
        "model_repository_root": str(folder),
        "load_models_at_startup": True,
    }
    (folder / "settings.json").write_text(json.dumps(server, indent=2), encoding="utf-8")
    for name, versions in models.items():
        for version in versions:
            settings = {
                "name": name,
                "implementation": RUNTIME,
                "inputs": _tensors(configs[name], "input"),
                "outputs": _tensors(configs[name], "output"),
                "parameters": {
                    "version": version,
                    "extra": {"repository": str(repository), "model": name, "version": version},
                },
            }
            target = folder / name / version / "model-settings.json"
            target.parent.mkdir(parents=True)
            target.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return models


class MLServerServer(InferenceServer):
    """MLServer over the stack's model repository, on Triton's ports."""

    name = "mlserver"
    start_timeout_s = 180.0

    def __init__(self, settings: StackSettings, venv: Path = MLSERVER_VENV) -> None:
        super().__init__(settings)
        self.venv = venv
        self.settings_dir = self.directory / "settings"

    @property
    def log_path(self) -> Path:
        return self.directory / "mlserver.log"

    @property
    def marker(self) -> str:
        return str(self.settings_dir)

    @property
    def executable(self) -> Path:
        return self.venv / "bin" / "mlserver"

    def check(self) -> None:
        if not self.executable.is_file():
            raise ToolMissingError(
                f"MLServer is not installed at {self.executable}: run scripts/bootstrap.sh "
                "(it makes .venv-mlserver from requirements/mlserver.lock)"
            )
        if not text_models(self.model_repository):
            raise NoModelsError(
                f"the model repository {self.model_repository} holds no Python-backend model "
                "with one text input for MLServer to serve"
            )

    def prepare(self) -> None:
        self.check()
        s = self.settings
        ports = (s.triton_http_port, s.triton_grpc_port, s.triton_metrics_port)
        write_settings(self.model_repository, self.settings_dir, ports, s.triton_host)

    def is_outdated(self, pid: int) -> bool:
        """Serving another repository than the settings name (the written settings say)."""
        written = next(self.settings_dir.glob("*/*/model-settings.json"), None)
        if written is None:
            return True
        extra = json.loads(written.read_text(encoding="utf-8"))["parameters"]["extra"]
        return bool(extra["repository"] != str(self.model_repository))

    def command(self) -> tuple[Sequence[str], Mapping[str, str] | None]:
        env = dict(os.environ)
        # modelhost (numpy and the standard library only) from this checkout; nothing of the
        # project's own virtual environment leaks in.
        env["PYTHONPATH"] = str(project_root())
        env.pop("VIRTUAL_ENV", None)
        env.pop("PYTHONHOME", None)
        env["PATH"] = os.pathsep.join([str(self.venv / "bin"), env.get("PATH", "")])
        return [str(self.executable), "start", str(self.settings_dir)], env


@contextmanager
def private_mlserver(
    repository: Path, state_dir: Path, ports: tuple[int, int, int]
) -> Iterator[MLServerServer]:
    """An MLServer of its own over ``repository`` (HTTP, gRPC and metrics on ``ports``, state
    under ``state_dir``), stopped when the block exits."""
    http, grpc, metrics = ports
    server = MLServerServer(
        StackSettings(
            state_dir=state_dir,
            model_repository=repository,
            triton_http_port=http,
            triton_grpc_port=grpc,
            triton_metrics_port=metrics,
        )
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
