"""Development tools: the local service stack without Docker, the demo, sample traffic.

Kafka, PostgreSQL and Triton run as plain processes (``modstream stack``); ``modstream demo``
drives the whole pipeline on them. Never imported by a service; the Kafka jars' pom
(``kafka-jars/``) and the compose Triton image (``triton-image/``) sit beside this code.

Start or stop one service from Python (the chaos tests do)::

    from stack.settings import StackSettings
    from stack import KafkaServer, PostgresServer, TritonServer

    triton = TritonServer(StackSettings())
    triton.stop()    # only our own process, found by pid file and command line
    triton.start()   # idempotent; blocks until /v2/health/ready answers

``LocalStack(settings).up() / down() / status()`` does all three (``modstream stack``).
"""

from __future__ import annotations

from stack.errors import (
    NoModelsError,
    PortInUseError,
    ServiceStartError,
    StackError,
    ToolMissingError,
)
from stack.kafka import KafkaServer
from stack.local_stack import SERVICE_NAMES, LocalStack, UpReport
from stack.postgres import PostgresServer
from stack.service import LocalService, ServiceStatus
from stack.triton import TritonServer, private_triton

__all__ = [
    "SERVICE_NAMES",
    "KafkaServer",
    "LocalService",
    "LocalStack",
    "NoModelsError",
    "PortInUseError",
    "PostgresServer",
    "ServiceStartError",
    "ServiceStatus",
    "StackError",
    "ToolMissingError",
    "TritonServer",
    "UpReport",
    "private_triton",
]
