"""Decisions to Kafka ``moderation.decisions`` through a transactional outbox.

A decision's record is written to ``review_decision_outbox`` in the decision's own transaction;
:class:`OutboxRelay` then publishes pending records in order and marks them. The API flushes right
after each decision and a background loop retries, so a Kafka outage delays decisions but never
loses one. Delivery is at least once; consumers de-duplicate on ``decision_id``.

Two kinds of failure are told apart. An outage (timeouts, broker away) stops the flush: every
later record would fail the same way, and they wait in order. A record Kafka refuses for itself
(:class:`PublishRefusedError`: too large, corrupt) is about that record only: its attempt is
counted and the flush goes on with the next ones; after ``max_attempts`` attempts the row is
marked failed with the reason (``failed_at``, ``failure_reason``), kept for an admin and skipped
from then on. :meth:`OutboxRelay.backlog` gives the figures ``/metrics`` exports.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from common.kafka_client import kafka_security_kwargs
from common.logs import get_logger
from common.publishing import (
    DurableRecord,
    PublishAfterDurable,
    PublishDeferred,
    PublishError,
    RecordPublisher,
)
from common.settings import KafkaSettings
from review.errors import PublishFailedError, PublishRefusedError

__all__ = ["KafkaDecisionPublisher", "OutboxBacklog", "OutboxRelay", "encode_payload"]

_log = get_logger(__name__)
_REFUSED_RECORD_ERRORS = (
    "MessageSizeTooLargeError",
    "RecordTooLargeError",
    "RecordListTooLargeError",
    "CorruptRecordException",
)
"""aiokafka errors about the record itself, by class name (aiokafka is imported lazily)."""
_MAX_REASON_CHARS = 200


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
        """Send each record in order and wait for it; raise :class:`PublishRefusedError` when
        Kafka refuses the record itself, :class:`PublishFailedError` otherwise."""
        from aiokafka.errors import KafkaError

        for key, value in records:
            try:
                async with asyncio.timeout(self._timeout_s):
                    producer = await self._ensure_started()
                    await producer.send_and_wait(topic, value=value, key=key)
            except (KafkaError, TimeoutError, OSError) as exc:
                reason = type(exc).__name__
                if reason in _REFUSED_RECORD_ERRORS:
                    raise PublishRefusedError(f"kafka refused the decision: {reason}") from exc
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


@dataclass(frozen=True, slots=True)
class OutboxBacklog:
    """What waits in the outbox: the oldest unpublished (not failed) row's age, failed rows."""

    oldest_unpublished_age_s: float
    failed: int


_SELECT_PENDING = """
SELECT decision_id, message_key, payload::text AS payload, attempts
FROM review_decision_outbox WHERE published_at IS NULL AND failed_at IS NULL
ORDER BY created_at, decision_id LIMIT $1 FOR UPDATE SKIP LOCKED
"""

_COUNT_ATTEMPT = """
UPDATE review_decision_outbox SET attempts = attempts + 1 WHERE decision_id = $1
RETURNING attempts
"""

_MARK_FAILED = """
UPDATE review_decision_outbox SET failed_at = now(), failure_reason = $2 WHERE decision_id = $1
"""

_BACKLOG = """
SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE failed_at IS NULL)),
                0)::float8 AS age,
       count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed
FROM review_decision_outbox WHERE published_at IS NULL
"""


class OutboxRelay:
    """Publishes pending outbox rows oldest first and marks each one published; sets aside rows
    Kafka keeps refusing (see the module docstring)."""

    def __init__(
        self,
        pool: asyncpg.Pool[Any],
        publisher: RecordPublisher,
        decision_topic: str,
        batch_size: int = 100,
        *,
        max_attempts: int = 5,
        on_published: Callable[[int], None] | None = None,
        on_refused: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
    ) -> None:
        self._pool = pool
        self._publisher = publisher
        self._topic = decision_topic
        self._batch_size = batch_size
        self._max_attempts = max_attempts
        self._on_published = on_published
        self._on_refused = on_refused
        self._on_failed = on_failed

    async def flush(self) -> int:
        """Publish what is pending; returns how many were published.

        Raises :class:`PublishFailedError` (after recording the attempt) when Kafka is
        unavailable; everything published before it stays marked. A record Kafka refuses for
        itself is counted (and set aside after its attempts) and the flush goes on.
        """
        published = 0
        failure: PublishFailedError | None = None
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(_SELECT_PENDING, self._batch_size)
            publishing = PublishAfterDurable(self._publisher, self._topic, _OutboxMarks(conn))
            for row in rows:
                record = DurableRecord(
                    row["decision_id"], row["message_key"].encode(), row["payload"].encode()
                )
                try:
                    await publishing.publish([record])
                except PublishDeferred as exc:
                    attempts = await conn.fetchval(_COUNT_ATTEMPT, row["decision_id"])
                    cause = exc.__cause__
                    if isinstance(cause, PublishError) and not cause.retriable:
                        # Kafka refuses this record itself: count it, set aside after attempts.
                        await self._refused(conn, row["decision_id"], attempts, cause)
                        continue
                    failure = PublishFailedError(str(exc))
                    break
                published += 1
        if published:
            _log.info("decisions_published", count=published)
            if self._on_published is not None:
                self._on_published(published)
        if failure is not None:
            raise failure
        return published

    async def _refused(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[Any],
        decision_id: Any,
        attempts: int,
        error: PublishError,
    ) -> None:
        if self._on_refused is not None:
            self._on_refused()
        if attempts < self._max_attempts:
            _log.warning("decision_refused", decision_id=str(decision_id), attempts=attempts)
            return
        reason = str(error)[:_MAX_REASON_CHARS]
        await conn.execute(_MARK_FAILED, decision_id, reason)
        if self._on_failed is not None:
            self._on_failed()
        _log.error(
            "decision_set_aside", decision_id=str(decision_id), attempts=attempts, reason=reason
        )

    async def backlog(self) -> OutboxBacklog:
        """The oldest pending decision's age in seconds (0 when none) and the failed rows."""
        row = await self._pool.fetchrow(_BACKLOG)
        if row is None:
            return OutboxBacklog(0.0, 0)
        return OutboxBacklog(float(row["age"]), int(row["failed"]))

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
