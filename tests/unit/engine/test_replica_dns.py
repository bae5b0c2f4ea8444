"""The replicas behind one DNS name (engine.replica_dns): ``host:port`` parsing, one sorted URL
per distinct address, and a typed failure when the name gives nothing usable."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine.errors import EngineError
from engine.replica_dns import ReplicaDns, ReplicaLookupFailed, split_host_port, system_resolver


class FixedAnswer:
    """A resolver that answers every lookup with ``addresses`` and records what it was asked."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        return list(self.addresses)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("triton-replicas:8001", ("triton-replicas", 8001)),
        (
            "triton-replicas.modstream.svc.cluster.local:8001",
            ("triton-replicas.modstream.svc.cluster.local", 8001),
        ),
        ("127.0.0.2:28001", ("127.0.0.2", 28001)),
        ("[fd00::1]:8001", ("fd00::1", 8001)),
    ],
)
def test_host_and_port_are_split(value: str, expected: tuple[str, int]) -> None:
    """A name or address and its port; brackets come off an IPv6 literal."""
    assert split_host_port(value) == expected


@pytest.mark.parametrize(
    "value", ["triton", "triton:", ":8001", "triton:80a", "triton:0", "triton:70000", "a b:1"]
)
def test_anything_but_host_and_port_is_refused(value: str) -> None:
    """No port, no host, a port that is not a number in 1..65535, a space in the name."""
    with pytest.raises(ValueError, match=r"host:port|port out of range|not a host name"):
        split_host_port(value)


async def test_each_distinct_address_is_one_sorted_replica_url() -> None:
    """Repeated addresses (one per socket type or family) count once; the URLs carry the
    Service's port, sorted, IPv6 in brackets; the resolver is asked for the name and port."""
    resolver = FixedAnswer("10.0.0.9", "10.0.0.3", "10.0.0.9", "fd00::7")
    dns = ReplicaDns("triton-replicas:8001", resolver)
    assert await dns.urls() == ["10.0.0.3:8001", "10.0.0.9:8001", "[fd00::7]:8001"]
    assert resolver.asked == [("triton-replicas", 8001)]


async def test_a_name_without_addresses_is_a_typed_retriable_failure() -> None:
    """No address at all (no ready pod behind a headless Service) is ``ReplicaLookupFailed``,
    a retriable ``EngineError``, not an empty pool."""
    with pytest.raises(ReplicaLookupFailed, match="no address") as caught:
        await ReplicaDns("triton-replicas:8001", FixedAnswer()).urls()
    assert isinstance(caught.value, EngineError)
    assert caught.value.retriable


async def test_an_answer_that_is_not_an_address_is_refused() -> None:
    """A resolver answering with a name instead of an address is refused, not dialled."""
    with pytest.raises(ReplicaLookupFailed, match="non-address"):
        await ReplicaDns("t:1", FixedAnswer("10.0.0.1", "elsewhere.example")).urls()


async def test_the_system_resolver_returns_a_literal_address_as_is() -> None:
    """getaddrinfo of an address literal needs no lookup: the address comes back."""
    assert set(await system_resolver("127.0.0.7", 8001)) == {"127.0.0.7"}
