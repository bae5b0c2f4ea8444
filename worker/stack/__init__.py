"""The local service stack without Docker: Kafka, PostgreSQL and Triton as plain processes.

Start or stop one service from Python (the chaos tests do)::

    from worker.settings import Settings
    from worker.stack import KafkaServer, PostgresServer, TritonServer

    triton = TritonServer(Settings().stack)
    triton.stop()    # only our own process, found by pid file and command line
    triton.start()   # idempotent; blocks until /v2/health/ready answers

``LocalStack(settings).up() / down() / status()`` does all three (``modstream stack``).
"""

from __future__ import annotations

from worker.stack.errors import (
    NoModelsError,
    PortInUseError,
    ServiceStartError,
    StackError,
    ToolMissingError,
)
from worker.stack.kafka import KafkaServer
from worker.stack.postgres import PostgresServer
from worker.stack.service import LocalService, ServiceStatus
from worker.stack.stack import SERVICE_NAMES, LocalStack, UpReport
from worker.stack.triton import TritonServer, private_triton

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
