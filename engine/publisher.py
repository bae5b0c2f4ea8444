"""Kafka output: dead letters to ``chat.messages.dlq`` and verdicts to ``moderation.verdicts``.

An idempotent producer (acks=all). Dead letters keep the original bytes and carry the source
coordinates and reason in headers. Whatever the record's size, a dead letter always leaves as a
record that fits ``max_message_bytes``: a key longer than half the room is dropped
(``key_dropped``, ``original_key_bytes``), the value is cut to what room the key leaves
(``truncated``, ``original_bytes``), and if Kafka still refuses the record for its size (a
broker or topic limit below ours), a metadata-only record (no key, empty value,
``metadata_only``) is sent instead. A dead letter is never retried forever for being too large.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from common.kafka_client import kafka_security_kwargs
from common.publishing import PublishError
from engine.record_partitions import KeyPartitioner, group_by_partition
from engine.settings import KafkaSettings
from pipelines.messages import SourcePosition

__all__ = ["KafkaPublisher"]

_HEADROOM_BYTES = 64 * 1024
"""Room left in a dead letter for headers and Kafka's record-batch framing."""
_MAX_REASON_BYTES = 1024
_MAX_BATCH_BYTES = 256 * 1024
"""Upper bound of one record batch (below the broker's default ``message.max.bytes``)."""


class KafkaPublisher:
    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._producer: AIOKafkaProducer | None = None
        self._max_value_bytes = settings.max_message_bytes - _HEADROOM_BYTES
        self._partitioner = KeyPartitioner()

    async def start(self) -> None:
        if self._producer is not None:
            return
        producer = AIOKafkaProducer(
            bootstrap_servers=self._settings.bootstrap_servers,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            max_request_size=self._settings.max_message_bytes,
            max_batch_size=min(_MAX_BATCH_BYTES, self._settings.max_message_bytes),
            **kafka_security_kwargs(self._settings),
        )
        await producer.start()
        self._producer = producer

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def __aenter__(self) -> KafkaPublisher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _require(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise PublishError("publisher not started")
        return self._producer

    async def dead_letter(
        self,
        value: bytes | None,
        key: bytes | None,
        position: SourcePosition,
        reason_code: str,
        reason: str,
    ) -> None:
        """Send one record to the DLQ and wait for the acknowledgement."""
        payload = value or b""
        headers: list[tuple[str, bytes]] = [
            ("source_topic", position.topic.encode()),
            ("source_partition", str(position.partition).encode()),
            ("source_offset", str(position.offset).encode()),
            ("reason_code", reason_code.encode()),
            ("reason", reason.encode()[:_MAX_REASON_BYTES]),
            ("original_bytes", str(len(payload)).encode()),
        ]
        if value is None:
            headers.append(("original_null", b"true"))
        if key is not None and len(key) > self._max_value_bytes // 2:
            headers += [("key_dropped", b"true"), ("original_key_bytes", str(len(key)).encode())]
            key = None
        room = self._max_value_bytes - len(key or b"")
        if len(payload) > room:
            payload = payload[:room]
            headers.append(("truncated", b"true"))
        producer = self._require()
        topic = self._settings.dlq_topic
        try:
            try:
                await producer.send_and_wait(topic, payload, key=key, headers=headers)
            except MessageSizeTooLargeError:
                headers.append(("metadata_only", b"true"))
                await producer.send_and_wait(topic, b"", key=None, headers=headers)
        except KafkaError as exc:
            raise PublishError(f"dead letter not acknowledged: {type(exc).__name__}") from exc

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Send ``(key, value)`` records and wait until all are acknowledged.

        Records are grouped by the partition the default partitioner gives their key and sent
        as whole batches, one acknowledgement to wait for per batch instead of per record.
        """
        producer = self._require()
        try:
            partitions = sorted(await producer.partitions_for(topic))
            groups = group_by_partition(records, partitions, self._partitioner)
            acks: list[Any] = []
            for partition, items in groups.items():
                batch = producer.create_batch()
                for key, value in items:
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        acks.append(await producer.send_batch(batch, topic, partition=partition))
                        batch = producer.create_batch()
                        if batch.append(key=key, value=value, timestamp=None) is None:
                            raise PublishError("a record does not fit an empty record batch")
                acks.append(await producer.send_batch(batch, topic, partition=partition))
            await asyncio.gather(*acks)
        except KafkaError as exc:
            raise PublishError(f"publish not acknowledged: {type(exc).__name__}") from exc
