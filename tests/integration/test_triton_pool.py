"""The worker on a pool of two real Triton replicas, one of them stopped and started mid-run.

Two private ``tritonserver`` processes (``stack.triton.TritonServer`` on free ports, state under
the test's temporary folder) serve the fixture model; the worker gets both in
``triton.grpc_urls``. Records keep arriving while replica ``b`` is stopped and started again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from common.settings import project_root
from stack.kafka_tools import end_offsets
from stack.samples import SampleRecord, produce, sample_stream
from stack.settings import StackSettings
from stack.triton import TritonServer
from tests.integration.conftest import free_ports, wait_until
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

FIXTURE_REPOSITORY = project_root() / "tests" / "fixtures" / "model_repository"
CHUNK = 40
"""Records produced every ``CHUNK_EVERY_S`` while the test runs."""
CHUNK_EVERY_S = 0.25


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[TritonServer, TritonServer]]:
    """Two tritonservers over the fixture repository, each with its own ports and state."""
    servers: list[TritonServer] = []
    try:
        for name in ("a", "b"):
            http, grpc, metrics = free_ports(3)
            server = TritonServer(
                StackSettings(
                    state_dir=tmp_path / f"triton-{name}",
                    model_repository=FIXTURE_REPOSITORY,
                    triton_http_port=http,
                    triton_grpc_port=grpc,
                    triton_metrics_port=metrics,
                )
            )
            servers.append(server)
            server.start()
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


class Feed:
    """Produces a chunk of sample records every ``CHUNK_EVERY_S`` until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.records: list[SampleRecord] = []
        self.running = True

    async def run(self) -> None:
        chunk = 0
        while self.running:
            records = list(
                sample_stream(CHUNK, seed=chunk, malformed_every=20, id_prefix=f"pool{chunk}")
            )
            await produce(self.bootstrap, self.topic, records)
            self.records.extend(records)
            chunk += 1
            await asyncio.sleep(CHUNK_EVERY_S)


def _calls(worker: Worker, url: str) -> float:
    value = worker.metrics.registry.get_sample_value(
        "modstream_inference_replica_calls_total", {"replica": url}
    )
    return value or 0.0


def _breaker(worker: Worker, url: str, state: str) -> float:
    value = worker.metrics.registry.get_sample_value(
        "modstream_inference_replica_breaker_state", {"replica": url, "state": state}
    )
    return value or 0.0


def _failures(worker: Worker, name: str, labels: dict[str, str]) -> float:
    return worker.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a_replica_stopped_mid_run_costs_nothing_and_returns(
    worker_settings: WorkerSettings, replicas: tuple[TritonServer, TritonServer]
) -> None:
    """With replica b stopped mid-run every record still gets exactly one outcome, all scored by
    the model (no ``pending_model``, no failed batch); once b is back its breaker closes on its
    own and its call count grows again."""
    a, b = replicas
    triton = worker_settings.triton.model_copy(
        update={
            "grpc_urls": (a.endpoint, b.endpoint),
            "breaker_failure_threshold": 2,
            "breaker_reset_s": 1.0,
        }
    )
    s = worker_settings.model_copy(update={"triton": triton})
    feed = Feed(s.kafka.bootstrap_servers, s.kafka.input_topic)
    stop = asyncio.Event()
    worker = Worker(s)
    task = asyncio.create_task(worker.run(stop))
    feeding = asyncio.create_task(feed.run())
    dsn = s.postgres.dsn.get_secret_value()
    conn = await asyncpg.connect(dsn)
    try:

        async def check(condition: bool) -> bool:
            for running in (task, feeding):
                if running.done():
                    running.result()  # surface a crash instead of waiting for the timeout
            return condition

        async def both_serving() -> bool:
            return await check(_calls(worker, a.endpoint) > 0 and _calls(worker, b.endpoint) > 0)

        await wait_until(both_serving, timeout_s=120)
        await asyncio.to_thread(b.stop)  # records keep arriving meanwhile

        async def b_out() -> bool:
            return await check(_breaker(worker, b.endpoint, "closed") == 0)

        await wait_until(b_out, timeout_s=30)
        await asyncio.sleep(2.0)  # traffic on a alone for a while
        calls_while_down = _calls(worker, b.endpoint)
        await asyncio.to_thread(b.start)

        async def b_back() -> bool:
            return await check(_breaker(worker, b.endpoint, "closed") == 1)

        await wait_until(b_back, timeout_s=30)

        async def b_serving_again() -> bool:
            return await check(_calls(worker, b.endpoint) > calls_while_down + 2)

        await wait_until(b_serving_again, timeout_s=30)
        feed.running = False
        await asyncio.wait_for(feeding, timeout=30)
        produced = feed.records

        async def all_handled() -> bool:
            n = await conn.fetchval(
                "SELECT (SELECT count(*) FROM verdicts WHERE source_topic = $1) + "
                "(SELECT count(*) FROM dead_letters WHERE source_topic = $1)",
                s.kafka.input_topic,
            )
            return await check(int(n) >= len(produced))

        await wait_until(all_handled, timeout_s=120)
        stop.set()
        await asyncio.wait_for(task, timeout=60)
        rows = await conn.fetch(
            "SELECT message_id, decided_by FROM verdicts WHERE source_topic = $1",
            s.kafka.input_topic,
        )
        dead = await conn.fetchval(
            "SELECT count(*) FROM dead_letters WHERE source_topic = $1", s.kafka.input_topic
        )
        stored = {
            r["partition"]: r["next_offset"]
            for r in await conn.fetch(
                "SELECT partition, next_offset FROM consumer_offsets WHERE consumer_group = $1 "
                "AND topic = $2",
                s.kafka.group_id,
                s.kafka.input_topic,
            )
        }
    finally:
        feed.running = False
        stop.set()
        for running in (feeding, task):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(running, timeout=60)
        await conn.close()

    good = sorted(r.message_id for r in produced if r.message_id is not None)
    assert sorted(r["message_id"] for r in rows) == good  # each exactly once, none lost
    assert int(dead) == len(produced) - len(good)
    ends = await end_offsets(s.kafka.bootstrap_servers, s.kafka.input_topic)
    assert stored == {p: e for p, e in ends.items() if e > 0}
    decided_by = Counter(r["decided_by"] for r in rows)
    assert decided_by["pending_model"] == 0
    assert decided_by["model"] > 0
    for error in ("InferenceUnavailable", "InferenceRejected"):
        assert _failures(worker, "modstream_inference_failures_total", {"error": error}) == 0
    # The stop was noticed mid-run: calls to b failed and were answered by a instead.
    b_failures = {"replica": b.endpoint, "error": "unavailable"}
    assert _failures(worker, "modstream_inference_replica_failures_total", b_failures) >= 1
