"""The whole local stack: Kafka, PostgreSQL and Triton, started and stopped together.

The ``triton`` service is the stack's model server: Triton, or MLServer over the same
repository and ports when ``stack.inference_server`` is ``mlserver`` (``stack.mlserver``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from stack.errors import StackError
from stack.inference_server import InferenceServer
from stack.kafka import KafkaServer
from stack.mlserver import MLServerServer
from stack.postgres import PostgresServer
from stack.service import LocalService, ServiceStatus
from stack.settings import StackToolSettings
from stack.topics import ensure_topics, stack_topics
from stack.triton import TritonServer

__all__ = ["SERVICE_NAMES", "LocalStack", "UpReport"]

SERVICE_NAMES: tuple[str, ...] = ("postgres", "kafka", "triton")
"""Start order (stop order is the reverse)."""


@dataclass(frozen=True, slots=True)
class UpReport:
    """What ``up`` did per service."""

    started: tuple[str, ...]
    already_running: tuple[str, ...]
    topics_created: tuple[str, ...]


class LocalStack:
    """Start, stop and inspect the services; ``only`` restricts any call to some of them."""

    def __init__(self, settings: StackToolSettings) -> None:
        self.settings = settings
        stack = settings.stack
        servers: dict[str, type[InferenceServer]] = {
            "triton": TritonServer,
            "mlserver": MLServerServer,
        }
        server = servers.pop(stack.inference_server)
        (other,) = servers.values()
        self._idle_server: LocalService = other(stack)
        """The model server not chosen: ``down`` stops it too, in case it was started before
        ``inference_server`` changed (it holds the same ports)."""
        self.services: dict[str, LocalService] = {
            "postgres": PostgresServer(stack),
            "kafka": KafkaServer(stack),
            "triton": server(stack),
        }

    def select(self, only: Iterable[str] | None = None) -> list[LocalService]:
        """The services named in ``only`` (all when ``None``), in start order."""
        if only is None:
            return [self.services[name] for name in SERVICE_NAMES]
        wanted = set(only)
        unknown = wanted - set(SERVICE_NAMES)
        if unknown:
            raise StackError(f"unknown service(s): {', '.join(sorted(unknown))}")
        return [self.services[name] for name in SERVICE_NAMES if name in wanted]

    def up(self, only: Iterable[str] | None = None) -> UpReport:
        """Start what is not running, wait until all are healthy, create the Kafka topics."""
        chosen = self.select(only)
        for service in chosen:
            service.check()
        launched = [service.name for service in chosen if service.launch()]
        for service in chosen:
            service.wait_ready()
        created: list[str] = []
        if any(service.name == "kafka" for service in chosen):
            specs = stack_topics(self.settings.kafka, self.settings.stack.partitions)
            created = ensure_topics(self.services["kafka"].endpoint, specs)
        return UpReport(
            started=tuple(launched),
            already_running=tuple(s.name for s in chosen if s.name not in launched),
            topics_created=tuple(created),
        )

    def down(self, only: Iterable[str] | None = None) -> list[str]:
        """Stop our processes (reverse start order); returns the names actually stopped."""
        chosen = list(reversed(self.select(only)))
        if self.services["triton"] in chosen:
            chosen.insert(chosen.index(self.services["triton"]) + 1, self._idle_server)
        return [service.name for service in chosen if service.stop()]

    def status(self, only: Iterable[str] | None = None) -> list[ServiceStatus]:
        """Each service's status, probed now."""
        return [service.status() for service in self.select(only)]
