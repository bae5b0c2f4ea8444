"""The Kafka decision publisher wraps broker failures in the review's own error type."""

from __future__ import annotations

import socket

import pytest

from common.publishing import PublishError
from common.settings import KafkaSettings
from review.decisions import KafkaDecisionPublisher
from review.errors import PublishFailedError


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_unreachable_kafka_raises_publish_failed() -> None:
    """With no broker listening, publish raises PublishFailedError (retriable, a PublishError)."""
    publisher = KafkaDecisionPublisher(
        KafkaSettings(bootstrap_servers=f"127.0.0.1:{_closed_port()}"), timeout_s=3
    )
    with pytest.raises(PublishFailedError) as caught:
        await publisher.publish("moderation.decisions", [(b"k", b"{}")])
    assert caught.value.retriable
    assert isinstance(caught.value, PublishError)
    await publisher.stop()
    await publisher.stop()
