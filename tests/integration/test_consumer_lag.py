"""Consumer lag against the real broker: what the worker exports for dashboards and alerts."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Sequence

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.offsets import OffsetTracker, PartitionKey
from stack.kafka_tools import end_offsets
from stack.samples import produce, sample_stream
from tests.integration.conftest import PARTITIONS, wait_until
from worker.app import Worker
from worker.settings import WorkerSettings
from worker.source import KafkaSource

pytestmark = pytest.mark.integration


class _NothingStored:
    async def stored_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        return {}


async def _ignore_revoke(keys: list[PartitionKey]) -> None:
    return None


async def test_lag_is_the_end_offset_minus_the_next_offset_to_commit(
    worker_settings: WorkerSettings,
) -> None:
    """Before anything is handled, each partition's lag is its record count (counted from its
    beginning); once the first five records of one partition are durable, its lag drops by
    five and the others' do not move."""
    s = worker_settings
    topic = s.kafka.input_topic
    await produce(s.kafka, topic, list(sample_stream(80, seed=3, id_prefix="lag")))
    ends = await end_offsets(s.kafka, topic)
    tracker = OffsetTracker()
    source = KafkaSource(s.kafka, _NothingStored(), tracker, _ignore_revoke)
    await source.start()
    try:

        async def assigned() -> bool:
            await source.fetch(200)  # drives the group join; the records are not handled
            return len(source.partitions_of(topic)) == PARTITIONS

        await wait_until(assigned, 60)
        lag = await source.lag()
        assert lag == {(topic, p): ends[p] for p in range(PARTITIONS)}
        busiest = max(range(PARTITIONS), key=lambda p: ends[p])
        key = (topic, busiest)
        for offset in range(ends[busiest]):
            tracker.start(key, offset)
        tracker.mark_durable(key, range(5))
        after = await source.lag()
        assert after[key] == ends[busiest] - 5
        assert {k: v for k, v in after.items() if k != key} == {
            k: v for k, v in lag.items() if k != key
        }
    finally:
        await source.stop()


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


async def test_a_worker_that_caught_up_exports_zero_lag_for_every_partition(
    worker_settings: WorkerSettings,
) -> None:
    """A live worker over 200 records: once every record is handled, its /metrics shows one
    lag series per assigned partition, each 0, and no record in flight."""
    s = worker_settings
    await produce(s.kafka, s.kafka.input_topic, list(sample_stream(200, seed=5, id_prefix="lg")))
    stop = asyncio.Event()
    worker = Worker(s)
    task = asyncio.create_task(worker.run(stop))
    try:

        async def caught_up() -> bool:
            if task.done():
                task.result()
            if worker.http_port is None:
                return False
            families = await asyncio.to_thread(_scrape, worker.http_port)
            lag = families.get("modstream_consumer_lag_records", [])
            return (
                len(lag) == PARTITIONS
                and all(value == 0 for _, value in lag)
                and families["modstream_oldest_in_flight_age_seconds"][0][1] == 0
            )

        await wait_until(caught_up, 90, interval_s=1.0)
        families = await asyncio.to_thread(_scrape, worker.http_port or 0)
        partitions = {
            labels["partition"] for labels, _ in families["modstream_consumer_lag_records"]
        }
        assert partitions == {str(p) for p in range(PARTITIONS)}
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
