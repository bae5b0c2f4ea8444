"""The development stack's settings: where and on which ports the local services run.

Read by ``modstream stack`` and ``modstream demo`` (``MODSTREAM_STACK__KAFKA_PORT=...``); the
daemon and the review service never see them.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from common.settings import Section, ServiceSettings, project_root

__all__ = ["StackSettings", "StackToolSettings"]


class StackSettings(Section):
    """Where and how ``modstream stack`` runs the local services."""

    state_dir: Path = Field(default_factory=lambda: project_root() / ".modstream")
    kafka_port: int = 19092
    kafka_controller_port: int = 19093
    kafka_heap_mb: int = 512
    kafka_secure: bool = False
    """Also serve SASL_SSL (SCRAM-SHA-512, throw-away CA) on ``kafka_secure_port``; see
    ``stack.kafka_secure``. The PLAINTEXT listener on ``kafka_port`` stays as it is."""
    kafka_secure_port: int = 19094
    postgres_port: int = 15432
    postgres_tls: bool = False
    """Serve PostgreSQL over TLS only (a throw-away CA under ``<state_dir>/postgres/tls``);
    the printed DSNs then carry ``sslmode=verify-full&sslrootcert=...``."""
    triton_host: str = "127.0.0.1"
    """The loopback address the inference server binds its three ports on (any of
    127.0.0.0/8): several servers may then share one port number, as the replicas behind one
    DNS name do (``tests/integration/test_triton_dns.py``)."""
    triton_http_port: int = 18000
    triton_grpc_port: int = 18001
    triton_metrics_port: int = 18002
    prometheus_port: int = 19090
    """Where ``modstream demo --with-prometheus`` serves Prometheus (``stack.prometheus``)."""
    model_repository: Path = Field(default_factory=lambda: project_root() / "model_repository")
    triton_model_config: str = ""
    """Triton's ``--model-config-name``: ``gpu`` serves each model's ``configs/gpu.pbtxt``
    (``KIND_GPU``, ``modelbuild.gpu_configs``) where it has one; empty: ``config.pbtxt``."""
    inference_server: Literal["triton", "mlserver"] = "triton"
    """Which Open Inference Protocol server serves ``model_repository`` on the ``triton_*``
    ports: Triton, or MLServer running the same model code (``stack.mlserver``)."""
    partitions: int = 4

    @field_validator("triton_host")
    @classmethod
    def _loopback_only(cls, value: str) -> str:
        try:
            address = ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"triton_host: not an IPv4 address: {value!r}") from None
        if not address.is_loopback:
            raise ValueError(f"triton_host: {value} is not a loopback address (127.0.0.0/8)")
        return value


class StackToolSettings(ServiceSettings):
    """Everything ``modstream stack`` and ``modstream demo`` read."""

    stack: StackSettings = StackSettings()
