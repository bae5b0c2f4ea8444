"""The replicas behind one DNS name: a headless Service's addresses, looked up again and again.

A Kubernetes headless Service (``clusterIP: None``) answers a lookup of its name with the address
of every ready pod behind it. :class:`ReplicaDns` turns ``triton.grpc_dns`` (``host:port``) into
one replica URL per address (``10.1.2.3:8001``), sorted, so the Triton client's pool
(``engine.replicas``) can keep one channel and one breaker per pod and follow the pods as they
come and go. The lookup itself is a :class:`Resolver`: the system's (``getaddrinfo``, off the
event loop) by default; a test hands in its own.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from typing import Protocol

from engine.errors import EngineError

__all__ = ["ReplicaDns", "ReplicaLookupFailed", "Resolver", "split_host_port", "system_resolver"]


class ReplicaLookupFailed(EngineError):
    """The name gave no address now (no such name, no answer, a resolver error); the replicas
    already known are kept."""

    retriable = True


class Resolver(Protocol):
    """Every address ``host`` has now (IPv4 or IPv6 literals, any order, maybe repeated)."""

    async def __call__(self, host: str, port: int) -> Sequence[str]: ...


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The system's answer for ``host`` (``getaddrinfo``: /etc/hosts, then DNS), TCP only."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise ReplicaLookupFailed(f"cannot resolve {host!r}: {exc}") from exc
    return [str(info[4][0]) for info in infos]


def split_host_port(value: str) -> tuple[str, int]:
    """``"host:port"`` (``"[v6]:port"`` for an IPv6 literal) as its two parts; ``ValueError``
    names what is wrong with anything else."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"expected host:port, got {value!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"port out of range in {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if any(c.isspace() for c in host) or "/" in host:
        raise ValueError(f"not a host name in {value!r}")
    return host, port


def _url(address: str, port: int) -> str:
    ip = ipaddress.ip_address(address)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


class ReplicaDns:
    """The replica URLs behind ``target`` (``host:port``), one per distinct address."""

    def __init__(self, target: str, resolver: Resolver = system_resolver) -> None:
        self.target = target
        self.host, self.port = split_host_port(target)
        self._resolver = resolver

    async def urls(self) -> list[str]:
        """One ``address:port`` per address the name has now, sorted; ``ReplicaLookupFailed``
        when it has none or the answer holds something that is not an address."""
        addresses = await self._resolver(self.host, self.port)
        try:
            urls = sorted({_url(address, self.port) for address in addresses})
        except ValueError as exc:
            raise ReplicaLookupFailed(f"{self.host!r} resolved to a non-address: {exc}") from exc
        if not urls:
            raise ReplicaLookupFailed(f"{self.host!r} has no address")
        return urls
