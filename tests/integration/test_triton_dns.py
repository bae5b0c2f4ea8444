"""Triton replicas behind one DNS name: three real servers, calls spread, one drained away.

Three private ``tritonserver`` processes serve the fixture model on the same ports, each on its
own loopback address (127.0.0.2, .3, .4), as three pods behind a Kubernetes headless Service
do. The client is the worker's own (``TritonModerationClient`` with ``triton.grpc_dns``); the
only stand-in is the resolver: the name ``triton-replicas.test`` answers with the addresses this
test lists, as the cluster's DNS would. The worker's breaker watcher drives the lookups. What is
counted is what each server says it served (Triton's own ``nv_inference_request_success``).
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from common.settings import project_root
from engine.inference import InferenceError
from engine.metrics import Metrics
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient
from stack.settings import StackSettings
from stack.triton import TritonServer
from tests.integration.conftest import free_ports, wait_until
from worker.watchers import watch_breaker

pytestmark = pytest.mark.integration

FIXTURE_REPOSITORY = project_root() / "tests" / "fixtures" / "model_repository"
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
NAME = "triton-replicas.test"
CALLERS = 6
"""Concurrent callers, as a worker's batch slots are."""
TEXTS = ["you are great", "see you tomorrow", "nobody likes you", "gg wp"]
TOLERANCE = 0.20
"""Each replica's share may differ from an even share by this fraction of it."""


class Answer:
    """The name's addresses, as the test sets them (a stand-in for the cluster's DNS)."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self.addresses = list(addresses)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        assert host == NAME
        return list(self.addresses)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[dict[str, TritonServer], int]]:
    """One tritonserver per address, all on the same three port numbers; and the gRPC port."""
    http, grpc, metrics = free_ports(3)
    started: dict[str, TritonServer] = {}
    try:
        for address in ADDRESSES:
            server = TritonServer(
                StackSettings(
                    state_dir=tmp_path / address,
                    model_repository=FIXTURE_REPOSITORY,
                    triton_host=address,
                    triton_http_port=http,
                    triton_grpc_port=grpc,
                    triton_metrics_port=metrics,
                )
            )
            server.start()
            started[address] = server
        yield started, grpc
    finally:
        for server in started.values():
            server.stop()


def _served(server: TritonServer) -> int:
    """Successful requests the server counted for the moderation model (its metrics port)."""
    s = server.settings
    url = f"http://{s.triton_host}:{s.triton_metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("nv_inference_request_success{") and 'model="moderation"' in line
    )


def _counts(servers: dict[str, TritonServer], addresses: Sequence[str]) -> dict[str, int]:
    return {address: _served(servers[address]) for address in addresses}


def _within(shares: dict[str, int]) -> bool:
    even = sum(shares.values()) / len(shares)
    return all(abs(n - even) <= TOLERANCE * even for n in shares.values())


def _sample_sum(metrics: Metrics, name: str) -> float:
    return sum(
        sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == name
    )


async def _call_until(client: TritonModerationClient, stop: asyncio.Event) -> int:
    """Call until ``stop``; any inference error propagates (and fails the test)."""
    calls = 0
    while not stop.is_set():
        result = await client.infer(TEXTS)
        assert len(result.scores) == len(TEXTS)
        calls += 1
    return calls


async def _calls(client: TritonModerationClient, n: int) -> None:
    async def caller() -> None:
        for _ in range(n):
            await client.infer(TEXTS)

    async with asyncio.TaskGroup() as group:
        for _ in range(CALLERS):
            group.create_task(caller())


async def test_calls_spread_over_every_address_and_a_removed_replica_drains_cleanly(
    servers: tuple[dict[str, TritonServer], int],
) -> None:
    """Calls spread evenly (each server within 20 % of an even share, by the servers' own
    counts) over the three addresses the name has; when one address leaves the answer while
    calls run, it gets no more calls once the pool has looked again, its channel closes after
    its last call, its server is stopped, and not one call fails; the two left share the rest
    evenly."""
    running, grpc_port = servers
    answer = Answer(ADDRESSES)
    metrics = Metrics()
    client = TritonModerationClient(
        TritonSettings(grpc_dns=f"{NAME}:{grpc_port}", dns_refresh_s=1.0, request_timeout_s=20.0),
        metrics=metrics.replicas,
        resolver=answer,
    )
    done = asyncio.Event()
    await client.start()
    watcher = asyncio.create_task(watch_breaker(client, metrics, done))
    try:
        assert sorted(r.url for r in client.breaker.replicas) == [
            f"{a}:{grpc_port}" for a in ADDRESSES
        ]
        before = _counts(running, ADDRESSES)
        await _calls(client, 50)
        spread = {a: n - before[a] for a, n in _counts(running, ADDRESSES).items()}
        print(f"\nspread over three replicas ({CALLERS * 50} calls): {spread}")
        assert sum(spread.values()) == CALLERS * 50
        assert _within(spread), spread

        # One pod leaves: it drops out of the name while calls keep running.
        stop = asyncio.Event()
        callers = [asyncio.create_task(_call_until(client, stop)) for _ in range(CALLERS)]
        await asyncio.sleep(1.0)
        gone, kept = ADDRESSES[2], ADDRESSES[:2]
        answer.addresses = list(kept)

        async def drained() -> bool:
            return len(client.breaker.replicas) == 2 and not client.breaker.leaving

        await wait_until(drained, timeout_s=15.0, interval_s=0.1)
        served_by_gone = _served(running[gone])
        running.pop(gone).stop()
        after_drain = _counts(running, kept)
        await asyncio.sleep(3.0)
        stop.set()
        made = sum(await asyncio.gather(*callers))
        rest = {a: n - after_drain[a] for a, n in _counts(running, kept).items()}
        last_calls = served_by_gone - before[gone] - spread[gone]
        print(
            f"drain: {made} calls while {gone} left ({last_calls} served there before its "
            f"channel closed); after it closed, the two left served {rest}"
        )
        assert made > 0
        assert _within(rest), rest
        assert _sample_sum(metrics, "modstream_inference_replica_failures_total") == 0
        assert _sample_sum(metrics, "modstream_inference_replicas") == 2
    finally:
        done.set()
        with contextlib.suppress(InferenceError):
            await watcher
        await client.stop()
