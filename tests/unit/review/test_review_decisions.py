"""The Kafka decision publisher wraps broker failures in the review's own error types; metrics."""

from __future__ import annotations

import socket

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, MessageSizeTooLargeError

from common.publishing import PublishError
from common.settings import KafkaSettings
from review.decisions import KafkaDecisionPublisher, OutboxBacklog
from review.errors import PublishFailedError, PublishRefusedError
from review.metrics import ReviewMetrics


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


class _RefusingProducer:
    """Stands in for the started aiokafka producer: raises ``error`` on every send."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None) -> None:
        raise self.error


async def _publish_with(error: Exception) -> PublishFailedError:
    publisher = KafkaDecisionPublisher(KafkaSettings())
    publisher._producer = _RefusingProducer(error)
    with pytest.raises(PublishFailedError) as caught:
        await publisher.publish("moderation.decisions", [(b"k", b"{}")])
    return caught.value


async def test_a_record_kafka_refuses_for_itself_is_a_refusal() -> None:
    """A record too large for Kafka raises PublishRefusedError: not retriable, row-specific."""
    error = await _publish_with(MessageSizeTooLargeError("1200000 bytes"))
    assert isinstance(error, PublishRefusedError)
    assert not error.retriable


@pytest.mark.parametrize(
    "error",
    [KafkaTimeoutError(), KafkaConnectionError("broker away")],
    ids=lambda e: type(e).__name__,
)
async def test_an_outage_is_not_a_refusal(error: Exception) -> None:
    """Timeouts and lost connections stay retriable PublishFailedError, never a refusal."""
    caught = await _publish_with(error)
    assert not isinstance(caught, PublishRefusedError)
    assert caught.retriable


def test_review_metrics_render_the_relay_figures_with_the_review_prefix() -> None:
    """The exposition names the failed-decision alert and the oldest-unpublished age."""
    metrics = ReviewMetrics()
    metrics.decisions_failed_total.inc()
    metrics.observe_backlog(OutboxBacklog(oldest_unpublished_age_s=12.5, failed=1))
    body, content_type = metrics.render()
    text = body.decode()
    assert content_type.startswith("text/plain")
    assert "modstream_review_decisions_failed_total 1.0" in text
    assert "modstream_review_oldest_unpublished_decision_age_seconds 12.5" in text
    assert "modstream_review_failed_decisions 1.0" in text
