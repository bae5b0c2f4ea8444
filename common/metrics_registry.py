"""A Prometheus registry with the standard collectors every modstream service exports.

Each service keeps a registry of its own (tests run several in one process), so the client's
default collectors, which live only in its global registry, are added here: the process
(``process_cpu_seconds_total``, ``process_resident_memory_bytes``, ``process_open_fds`` ...),
the platform (``python_info``) and the garbage collector (``python_gc_collections_total`` ...).
"""

from __future__ import annotations

from prometheus_client import (
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.registry import CollectorRegistry

__all__ = ["service_registry"]


def service_registry() -> CollectorRegistry:
    """A new registry holding the process, platform and GC collectors."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
