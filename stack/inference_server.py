"""What the stack's two model servers share: Triton and MLServer speak the same Open Inference
Protocol (KServe v2) on the ``triton_*`` ports over the same model repository.

:class:`InferenceServer` holds the repository's path, the endpoints, the ports and the readiness
probe (``/v2/health/ready``); ``stack.triton.TritonServer`` and ``stack.mlserver.MLServerServer``
add how each is prepared and started.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from common.settings import project_root
from stack.service import LocalService

__all__ = ["InferenceServer"]

_PROBE_TIMEOUT_S = 2.0


class InferenceServer(LocalService):
    """A KServe v2 server of the local stack on ``triton_http_port`` / ``triton_grpc_port`` /
    ``triton_metrics_port``, serving ``model_repository``."""

    @property
    def model_repository(self) -> Path:
        """The repository served; a relative path is taken from the working folder, or else
        from the project root (so ``tests/fixtures/model_repository`` works from anywhere).
        Links are kept, not resolved: ``modstream models pull`` serves ``<dir>/current``, a
        link it replaces, and the server must read through it when it loads a model again."""
        path = self.settings.model_repository
        if path.is_absolute() or path.exists():
            return Path(os.path.abspath(path))
        return Path(os.path.abspath(project_root() / path))

    @property
    def endpoint(self) -> str:
        """The gRPC address clients use (``triton.grpc_url``)."""
        return f"{self.settings.triton_host}:{self.settings.triton_grpc_port}"

    @property
    def http_url(self) -> str:
        """The HTTP endpoint (health, metadata, Triton's repository calls)."""
        return f"http://{self.settings.triton_host}:{self.settings.triton_http_port}"

    @property
    def host(self) -> str:
        return self.settings.triton_host

    def ports(self) -> tuple[int, ...]:
        s = self.settings
        return (s.triton_http_port, s.triton_grpc_port, s.triton_metrics_port)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(  # noqa: S310 (a fixed loopback http:// URL)
                f"{self.http_url}/v2/health/ready", timeout=_PROBE_TIMEOUT_S
            ) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False
