"""Start a private ``tritonserver`` (from the ``nvidia-pytriton`` wheel) on a model repository.

For the model tests and ``python -m bench.models`` when no stack is running: the server is the
wheel's binary with its Python backend and the stub for this interpreter's version, CPU only,
every model loaded (explicit mode, ``--load-model=*``). The stub embeds an isolated interpreter
that finds packages through the ``python3`` first on ``PATH``, so this environment's ``bin`` goes
first; ``LD_LIBRARY_PATH`` gets the wheel's libraries and the interpreter's ``LIBDIR``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalTriton", "TritonStartError", "local_triton"]


class TritonStartError(RuntimeError):
    """The server is missing, or did not become ready in time."""


@dataclass(frozen=True, slots=True)
class LocalTriton:
    """Endpoints of a running private server."""

    grpc_url: str
    http_url: str
    log_path: Path


def _wheel_dir() -> Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonStartError("nvidia-pytriton is not installed (pip install -e '.[stack]')")
    return Path(next(iter(spec.submodule_search_locations))) / "tritonserver"


def _backend_dir(wheel: Path, state: Path) -> Path:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = wheel / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise TritonStartError(f"no Python backend stub for Python {version}")
    target = state / "backends" / "python"
    target.mkdir(parents=True, exist_ok=True)
    for source in [*(wheel / "backends" / "python").glob("*.*"), stub]:
        if source.is_file():
            copy = target / source.name
            if not copy.is_file() or copy.stat().st_size != source.stat().st_size:
                shutil.copy2(source, copy)
    return state / "backends"


def _ready(http_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{http_url}/v2/health/ready", timeout=2.0) as resp:  # noqa: S310
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextmanager
def local_triton(
    repository: Path, state: Path, *, base_port: int = 28000, ready_timeout_s: float = 240.0
) -> Iterator[LocalTriton]:
    """Run the server (HTTP ``base_port``, gRPC ``+1``, metrics ``+2``) until the block exits."""
    wheel = _wheel_dir()
    state.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port, metrics_port = base_port, base_port + 1, base_port + 2
    argv = [
        str(wheel / "bin" / "tritonserver"),
        f"--model-repository={repository.resolve()}",
        f"--backend-directory={_backend_dir(wheel, state)}",
        "--model-control-mode=explicit",
        "--load-model=*",
        "--http-address=127.0.0.1",
        f"--http-port={http_port}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={grpc_port}",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={metrics_port}",
        "--allow-gpu-metrics=false",
        "--pinned-memory-pool-byte-size=0",
        "--exit-timeout-secs=10",
    ]
    env = dict(os.environ)
    libdir = sysconfig.get_config_var("LIBDIR")
    libs = [str(wheel.parent.parent / "nvidia_pytriton.libs"), *([str(libdir)] if libdir else [])]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
    env["PATH"] = os.pathsep.join([str(Path(sys.prefix) / "bin"), env.get("PATH", "")])
    env.pop("PYTHONHOME", None)
    log_path = state / "triton.log"
    http_url = f"http://127.0.0.1:{http_port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + ready_timeout_s
            while not _ready(http_url):
                if proc.poll() is not None:
                    raise TritonStartError(
                        f"tritonserver exited ({proc.returncode}); see {log_path}"
                    )
                if time.monotonic() > deadline:
                    raise TritonStartError(f"tritonserver not ready in time; see {log_path}")
                time.sleep(0.5)
            yield LocalTriton(f"127.0.0.1:{grpc_port}", http_url, log_path)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
