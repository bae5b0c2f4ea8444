"""Small Kafka look-ups shared by the demo, the benchmark and the tests."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

__all__ = ["end_offsets", "partition_ids"]


async def partition_ids(bootstrap_servers: str, topic: str) -> list[int]:
    """The topic's partition numbers, from the broker's metadata."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return sorted(int(p["partition"]) for t in described for p in t.get("partitions", []))


async def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """Next offset to be written, per partition."""
    partitions = [TopicPartition(topic, p) for p in await partition_ids(bootstrap_servers, topic)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    return {tp.partition: int(offset) for tp, offset in ends.items()}
