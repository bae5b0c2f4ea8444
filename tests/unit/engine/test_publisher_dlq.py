"""Tests for KafkaPublisher.dead_letter: any record, however large, leaves as a record that fits."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from engine.publisher import KafkaPublisher
from engine.settings import KafkaSettings
from pipelines.messages import SourcePosition

LIMIT = 1024 * 1024
POSITION = SourcePosition("chat.messages", 2, 41)


class _Producer:
    """Stands in for AIOKafkaProducer: the same size check as ``send``, then records the send."""

    def __init__(self, limit: int, *, broker_limit: int | None = None) -> None:
        self.limit = limit
        self.broker_limit = broker_limit
        self.sent: list[tuple[bytes | None, bytes, dict[str, bytes]]] = []

    async def send_and_wait(
        self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None
    ) -> None:
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        if size > self.limit or (self.broker_limit is not None and size > self.broker_limit):
            raise MessageSizeTooLargeError(f"{size} bytes")
        self.sent.append((key, value, dict(headers)))


def _publisher(producer: _Producer) -> KafkaPublisher:
    publisher = KafkaPublisher(KafkaSettings(max_message_bytes=LIMIT))
    publisher._producer = producer
    return publisher


async def _dead_letter(producer: _Producer, key: bytes | None, value: bytes) -> None:
    await _publisher(producer).dead_letter(value, key, POSITION, "too_large", "record too large")


async def test_key_plus_value_over_the_limit_still_sends_a_record_that_fits() -> None:
    """A 1.5 MB key with a 900 KB value (2.4 MB) is sent truncated, with coordinates and reason."""
    producer = _Producer(LIMIT)
    await _dead_letter(producer, b"k" * 1_500_000, b"v" * 900_000)
    ((key, value, headers),) = producer.sent
    assert len(key or b"") + len(value) < LIMIT
    assert headers["source_offset"] == b"41"
    assert headers["reason_code"] == b"too_large"
    assert headers["original_key_bytes"] == b"1500000"
    assert headers["original_bytes"] == b"900000"


async def test_a_value_that_fits_with_a_small_key_keeps_both() -> None:
    """The usual record: key and value go to the DLQ unchanged."""
    producer = _Producer(LIMIT)
    await _dead_letter(producer, b"group-1", b"{not json")
    ((key, value, headers),) = producer.sent
    assert (key, value) == (b"group-1", b"{not json")
    assert "truncated" not in headers


async def test_refused_for_size_anyway_falls_back_to_metadata_only() -> None:
    """If Kafka still refuses for size (a lower broker limit), a headers-only record is sent."""
    producer = _Producer(LIMIT, broker_limit=200_000)
    await _dead_letter(producer, b"group-1", b"v" * 800_000)
    ((key, value, headers),) = producer.sent
    assert value == b""
    assert key is None
    assert headers["metadata_only"] == b"true"
    assert headers["reason_code"] == b"too_large"


@pytest.mark.parametrize("key_bytes", [0, 10, 600_000])
async def test_sent_record_never_exceeds_the_limit(key_bytes: int) -> None:
    """Whatever the key, what is sent is within max_message_bytes."""
    producer = _Producer(LIMIT)
    await _dead_letter(producer, b"k" * key_bytes or None, b"v" * 3_000_000)
    ((key, value, headers),) = producer.sent
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers.items()))
    assert size <= LIMIT
