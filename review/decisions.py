"""Decisions to Kafka ``moderation.decisions`` through a transactional outbox.

A decision's record is written to ``review_decision_outbox`` in the decision's own transaction;
:class:`OutboxRelay` then publishes pending records in order and marks them. The API flushes right
after each decision and a background loop retries, so a Kafka outage delays decisions but never
loses one. Delivery is at least once; consumers de-duplicate on ``decision_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from common.kafka_client import kafka_security_kwargs
from common.logs import get_logger
from common.publishing import (
    DurableRecord,
    PublishAfterDurable,
    PublishDeferred,
    RecordPublisher,
)
from common.settings import KafkaSettings
from review.errors import PublishFailedError

__all__ = ["KafkaDecisionPublisher", "OutboxRelay", "encode_payload"]

_log = get_logger(__name__)


class KafkaDecisionPublisher:
    """An idempotent aiokafka producer, started on first use; each record waits for its ack."""

    def __init__(self, kafka: KafkaSettings, timeout_s: float = 10.0) -> None:
        self._kafka = kafka
        self._timeout_s = timeout_s
        self._producer: Any = None
        self._lock = asyncio.Lock()

    async def _ensure_started(self) -> Any:
        from aiokafka import AIOKafkaProducer

        async with self._lock:
            if self._producer is None:
                producer = AIOKafkaProducer(
                    bootstrap_servers=self._kafka.bootstrap_servers,
                    acks="all",
                    enable_idempotence=True,
                    client_id="modstream-review",
                    request_timeout_ms=int(self._timeout_s * 1000),
                    **kafka_security_kwargs(self._kafka),
                )
                try:
                    await producer.start()
                except BaseException:
                    with contextlib.suppress(Exception):
                        await producer.stop()
                    raise
                self._producer = producer
            return self._producer

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Send each record in order and wait for it; raise :class:`PublishFailedError`."""
        from aiokafka.errors import KafkaError

        for key, value in records:
            try:
                async with asyncio.timeout(self._timeout_s):
                    producer = await self._ensure_started()
                    await producer.send_and_wait(topic, value=value, key=key)
            except (KafkaError, TimeoutError, OSError) as exc:
                reason = type(exc).__name__
                raise PublishFailedError(f"kafka did not take the decision: {reason}") from exc

    async def stop(self) -> None:
        """Flush and close the producer; safe to call twice or when never started."""
        async with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()


class _OutboxMarks:
    """Marks outbox rows published inside the relay's transaction."""

    def __init__(self, conn: asyncpg.pool.PoolConnectionProxy[Any]) -> None:
        self._conn = conn

    async def mark_published(self, keys: Sequence[Any]) -> None:
        await self._conn.execute(
            "UPDATE review_decision_outbox SET published_at = now(), "
            "attempts = attempts + 1 WHERE decision_id = ANY($1::uuid[])",
            list(keys),
        )


class OutboxRelay:
    """Publishes pending outbox rows oldest first and marks each one published."""

    def __init__(
        self,
        pool: asyncpg.Pool[Any],
        publisher: RecordPublisher,
        decision_topic: str,
        batch_size: int = 100,
    ) -> None:
        self._pool = pool
        self._publisher = publisher
        self._topic = decision_topic
        self._batch_size = batch_size

    async def flush(self) -> int:
        """Publish what is pending; returns how many were published.

        Raises :class:`PublishFailedError` (after recording the attempt) when Kafka refuses a
        record; everything published before it stays marked.
        """
        published = 0
        failure: PublishFailedError | None = None
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "SELECT decision_id, message_key, payload::text AS payload "
                "FROM review_decision_outbox WHERE published_at IS NULL "
                "ORDER BY created_at, decision_id LIMIT $1 FOR UPDATE SKIP LOCKED",
                self._batch_size,
            )
            publishing = PublishAfterDurable(self._publisher, self._topic, _OutboxMarks(conn))
            for row in rows:
                record = DurableRecord(
                    row["decision_id"], row["message_key"].encode(), row["payload"].encode()
                )
                try:
                    await publishing.publish([record])
                except PublishDeferred as exc:
                    await conn.execute(
                        "UPDATE review_decision_outbox SET attempts = attempts + 1 "
                        "WHERE decision_id = $1",
                        row["decision_id"],
                    )
                    failure = PublishFailedError(str(exc))
                    break
                published += 1
        if published:
            _log.info("decisions_published", count=published)
        if failure is not None:
            raise failure
        return published

    async def run(self, interval_s: float) -> None:
        """Flush forever, every ``interval_s``; failures are logged and retried."""
        while True:
            try:
                await self.flush()
            except PublishFailedError as exc:
                _log.warning("decision_publish_failed", error=str(exc))
            except Exception:  # a database hiccup must not end the retry loop unnoticed
                _log.exception("decision_relay_failed")
            await asyncio.sleep(interval_s)


def encode_payload(payload: dict[str, Any]) -> str:
    """The JSON text stored in the outbox (and sent verbatim)."""
    return orjson.dumps(payload).decode()
