"""worker.consumer_lag: per-partition lag and the oldest in-flight age, as Prometheus sees them."""

from __future__ import annotations

from aiokafka.errors import KafkaConnectionError

from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey
from worker.consumer_lag import ConsumerLagProbe

TOPIC = "chat.messages"


class _Source:
    """Answers the lag it is given, or raises ``KafkaConnectionError`` while ``down``."""

    def __init__(self) -> None:
        self.lag_now: dict[PartitionKey, int] = {}
        self.down = False

    async def lag(self) -> dict[PartitionKey, int]:
        if self.down:
            raise KafkaConnectionError("broker away")
        return dict(self.lag_now)


def _lag(metrics: Metrics, partition: int) -> float | None:
    return metrics.registry.get_sample_value(
        "modstream_consumer_lag_records", {"topic": TOPIC, "partition": str(partition)}
    )


async def test_each_assigned_partition_gets_a_series_and_a_revoked_one_loses_it() -> None:
    """Two partitions are exported with their lag; after one is revoked only the other is left,
    so summing the series over workers never counts a partition twice."""
    source, metrics = _Source(), Metrics()
    probe = ConsumerLagProbe(source, OffsetTracker(), metrics)
    source.lag_now = {(TOPIC, 0): 120, (TOPIC, 1): 7}
    await probe.observe()
    assert (_lag(metrics, 0), _lag(metrics, 1)) == (120, 7)
    source.lag_now = {(TOPIC, 1): 3}
    await probe.observe()
    assert _lag(metrics, 0) is None
    assert _lag(metrics, 1) == 3


async def test_a_broker_that_cannot_answer_leaves_the_last_figures() -> None:
    """While the broker is away the last lag stays exported and the probe does not raise; the
    next answer replaces it."""
    source, metrics = _Source(), Metrics()
    probe = ConsumerLagProbe(source, OffsetTracker(), metrics)
    source.lag_now = {(TOPIC, 0): 50}
    await probe.observe()
    source.down = True
    await probe.observe()
    assert _lag(metrics, 0) == 50
    source.down, source.lag_now = False, {(TOPIC, 0): 0}
    await probe.observe()
    assert _lag(metrics, 0) == 0


async def test_the_oldest_in_flight_age_follows_the_oldest_record_not_yet_durable() -> None:
    """Records started at t=0 (partition 0) and t=4 (partition 1): at t=10 the age is 10 s;
    once partition 0's record is durable it is 6 s; with nothing in flight it is 0."""
    now = [0.0]
    tracker = OffsetTracker(clock=lambda: now[0])
    source, metrics = _Source(), Metrics()
    probe = ConsumerLagProbe(source, tracker, metrics)

    def age() -> float | None:
        return metrics.registry.get_sample_value("modstream_oldest_in_flight_age_seconds")

    tracker.start((TOPIC, 0), 10)
    now[0] = 4.0
    tracker.start((TOPIC, 1), 3)
    now[0] = 10.0
    await probe.observe()
    assert age() == 10.0
    tracker.mark_durable((TOPIC, 0), [10])
    await probe.observe()
    assert age() == 6.0
    tracker.mark_durable((TOPIC, 1), [3])
    await probe.observe()
    assert age() == 0.0


def test_every_worker_registry_carries_the_process_and_gc_collectors() -> None:
    """The standard collectors are in each worker's own registry, not only the global one."""
    metrics = Metrics()
    names = {m.name for m in metrics.registry.collect()}
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_gc_collections"} <= (
        names
    )
    assert "python_info" in names
