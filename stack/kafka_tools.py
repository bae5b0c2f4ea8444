"""Small Kafka look-ups shared by the demo, the benchmark and the tests.

Each takes the Kafka settings (their security applies) or a plaintext bootstrap address.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings

__all__ = ["end_offsets", "partition_ids"]


async def partition_ids(target: KafkaSettings | str, topic: str) -> list[int]:
    """The topic's partition numbers, from the broker's metadata."""
    admin = AIOKafkaAdminClient(**kafka_client_kwargs(target))
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return sorted(int(p["partition"]) for t in described for p in t.get("partitions", []))


async def end_offsets(target: KafkaSettings | str, topic: str) -> dict[int, int]:
    """Next offset to be written, per partition."""
    partitions = [TopicPartition(topic, p) for p in await partition_ids(target, topic)]
    consumer = AIOKafkaConsumer(**kafka_client_kwargs(target))
    await consumer.start()
    try:
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    return {tp.partition: int(offset) for tp, offset in ends.items()}
