"""Triton for the local stack: the ``tritonserver`` binary of the ``nvidia-pytriton`` wheel.

The wheel ships the server, the Python backend and one backend stub per Python version. The
stack builds ``<state_dir>/triton/backends/python`` from the backend plus the stub of the running
interpreter's version, and runs the server directly (CPU, every model of the repository loaded).

How the Python backend's stub finds numpy: the stub embeds libpython and starts an *isolated*
interpreter, so ``PYTHONPATH`` is ignored. Its program name is a bare ``python3``, which Python
resolves through ``PATH``; putting ``<sys.prefix>/bin`` (the virtual environment running the
stack) first on the server's ``PATH`` makes the stub find that ``python3`` and its
``pyvenv.cfg``, so ``site`` adds the environment's site-packages (numpy and every package the
models import). ``LD_LIBRARY_PATH`` gets the wheel's ``nvidia_pytriton.libs`` and the
interpreter's ``LIBDIR`` (for ``libpython3.X.so``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from stack.errors import NoModelsError, ToolMissingError
from stack.inference_server import InferenceServer
from stack.process import cmdline
from stack.settings import StackSettings

__all__ = [
    "TritonDistribution",
    "TritonServer",
    "model_names",
    "private_triton",
    "triton_environment",
]


class TritonDistribution:
    """Paths inside the installed ``nvidia-pytriton`` wheel."""

    def __init__(self, package_dir: Path) -> None:
        self.package_dir = package_dir
        self.server = package_dir / "tritonserver" / "bin" / "tritonserver"
        self.python_backend = package_dir / "tritonserver" / "backends" / "python"
        self.libs = package_dir.parent / "nvidia_pytriton.libs"

    @classmethod
    def find(cls) -> TritonDistribution:
        """Locate the wheel in the running interpreter's environment."""
        spec = importlib.util.find_spec("pytriton")
        if spec is None or not spec.submodule_search_locations:
            raise ToolMissingError(
                "nvidia-pytriton is not installed; run scripts/bootstrap.sh "
                "(pip install -e '.[dev,stack]')"
            )
        dist = cls(Path(next(iter(spec.submodule_search_locations))))
        if not dist.server.is_file():
            raise ToolMissingError(f"tritonserver not found at {dist.server}")
        return dist

    def stub(self, python_version: str) -> Path:
        """The Python backend stub built for ``python_version`` (e.g. ``"3.11"``)."""
        path = self.package_dir / "tritonserver" / "python_backend_stubs" / python_version
        stub = path / "triton_python_backend_stub"
        if not stub.is_file():
            raise ToolMissingError(f"no Python backend stub for Python {python_version}: {stub}")
        return stub


def model_names(repository: Path) -> list[str]:
    """The models in a Triton repository: sub-folders holding a ``config.pbtxt``."""
    if not repository.is_dir():
        return []
    return sorted(p.parent.name for p in repository.glob("*/config.pbtxt"))


def triton_environment(
    dist: TritonDistribution, base: Mapping[str, str], python_prefix: Path, libdir: str | None
) -> dict[str, str]:
    """The server's environment: libraries on ``LD_LIBRARY_PATH``, the venv first on ``PATH``."""
    env = dict(base)
    libraries = [str(dist.libs)]
    if libdir:
        libraries.append(libdir)
    if env.get("LD_LIBRARY_PATH"):
        libraries.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libraries)
    path = [str(python_prefix / "bin")]
    if env.get("PATH"):
        path.append(env["PATH"])
    env["PATH"] = os.pathsep.join(path)
    env.pop("PYTHONHOME", None)
    return env


class TritonServer(InferenceServer):
    """The Triton Inference Server of the local stack (CPU, Python backend)."""

    name = "triton"
    start_timeout_s = 180.0

    def __init__(self, settings: StackSettings) -> None:
        super().__init__(settings)
        self.backend_dir = self.directory / "backends"

    @property
    def log_path(self) -> Path:
        return self.directory / "triton.log"

    @property
    def marker(self) -> str:
        return f"--backend-directory={self.backend_dir}"

    def check(self) -> None:
        """Refuse an empty model repository and a missing ``nvidia-pytriton`` up front."""
        repository = self.model_repository
        if not model_names(repository):
            raise NoModelsError(
                f"the model repository {repository} holds no model (no */config.pbtxt); build "
                "the models, or for tests set "
                "MODSTREAM_STACK__MODEL_REPOSITORY=tests/fixtures/model_repository"
            )
        TritonDistribution.find()

    def prepare(self) -> None:
        self.check()
        dist = TritonDistribution.find()
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        target = self.backend_dir / "python"
        target.mkdir(parents=True, exist_ok=True)
        sources = [p for p in dist.python_backend.iterdir() if p.is_file()]
        for source in [*sources, dist.stub(version)]:
            copy = target / source.name
            if not copy.is_file() or copy.stat().st_size != source.stat().st_size:
                shutil.copy2(source, copy)

    def is_outdated(self, pid: int) -> bool:
        """Serving another model repository or model config than the settings name."""
        args = cmdline(pid)
        config = self.settings.triton_model_config
        wanted = [f"--model-config-name={config}"] if config else []
        running = [a for a in args if a.startswith("--model-config-name=")]
        return f"--model-repository={self.model_repository}" not in args or running != wanted

    def command(self) -> tuple[Sequence[str], Mapping[str, str] | None]:
        dist = TritonDistribution.find()
        s = self.settings
        argv = [
            str(dist.server),
            f"--model-repository={self.model_repository}",
            self.marker,
            "--model-control-mode=explicit",
            "--load-model=*",
            f"--http-address={s.triton_host}",
            f"--http-port={s.triton_http_port}",
            f"--grpc-address={s.triton_host}",
            f"--grpc-port={s.triton_grpc_port}",
            f"--metrics-address={s.triton_host}",
            f"--metrics-port={s.triton_metrics_port}",
            "--allow-gpu-metrics=false",
            "--pinned-memory-pool-byte-size=0",
            "--exit-timeout-secs=10",
        ]
        if s.triton_model_config:
            argv.append(f"--model-config-name={s.triton_model_config}")
        libdir = sysconfig.get_config_var("LIBDIR")
        env = triton_environment(
            dist, os.environ, Path(sys.prefix), str(libdir) if libdir else None
        )
        return argv, env


@contextmanager
def private_triton(
    repository: Path, state_dir: Path, ports: tuple[int, int, int], *, model_config: str = ""
) -> Iterator[TritonServer]:
    """A server of its own over ``repository`` (HTTP, gRPC and metrics on ``ports``, state under
    ``state_dir``; ``model_config``: ``--model-config-name``), stopped when the block exits: the
    model tests and ``bench.models`` grade a repository whatever the stack happens to serve."""
    http, grpc, metrics = ports
    server = TritonServer(
        StackSettings(
            state_dir=state_dir,
            model_repository=repository,
            triton_http_port=http,
            triton_grpc_port=grpc,
            triton_metrics_port=metrics,
            triton_model_config=model_config,
        )
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
