"""Appeals from Kafka ``moderation.appeals``: each record filed like ``POST /api/appeals``.

A record's value is the JSON of an appeal request (``review.schemas.AppealRequest``; key:
anything, the platform's appeal id is a good one). The review service reads the topic in one
consumer group (``review.appeals_group_id``), one record at a time, and commits a record's offset
only once it is handled:

* filed, or a replay of an appeal id already filed (nothing changes): handled;
* refused (not JSON, a field missing or out of bounds, a statement too long, nothing to appeal,
  already appealed under another id, not found): a dead letter, handled. The record's bytes go
  to ``kafka.appeal_dlq_topic`` with the headers ``source_topic``, ``source_partition``,
  ``source_offset``, ``reason_code``, ``reason`` (the reason never quotes the record), and a
  row goes to ``dead_letters``;
* PostgreSQL or Kafka unavailable, or any failure not about the record: tried again every
  ``review.appeals_retry_s`` until it is one of the above, never skipped (an unexpected failure
  is logged as an error, by exception type only). A record seen twice (a rebalance before its
  commit) is a replay.

The statement is never logged; log lines carry the record's coordinates and the reason code.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import orjson
from pydantic import ValidationError

from common.kafka_client import kafka_client_kwargs
from common.logs import get_logger
from common.publishing import PublishError
from common.settings import KafkaSettings
from review.errors import AppealError, InvalidAppealError
from review.schemas import AppealFiled, AppealRequest

__all__ = [
    "AppealFiler",
    "AppealReader",
    "AppealRecord",
    "DeadLetterSink",
    "KafkaAppealDeadLetters",
    "consume_appeals",
    "decode_appeal",
]

_log = get_logger(__name__)
_MAX_REASON_CHARS = 300

_TRANSIENT: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.InsufficientResourcesError,
    asyncpg.OperatorInterventionError,
    asyncpg.SerializationError,
    asyncpg.DeadlockDetectedError,
    PublishError,
)
"""Failures of the services, not of the record: the record is tried again."""

_REFUSED_BY_DATABASE: tuple[type[BaseException], ...] = (
    asyncpg.DataError,
    asyncpg.IntegrityConstraintViolationError,
)
"""The record's values broke a database constraint: retrying gives the same answer."""


@dataclass(frozen=True, slots=True)
class AppealRecord:
    """One record of the appeals topic, as the reader needs it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class AppealFiler(Protocol):
    """Files an appeal (``review.appeals.AppealDesk``)."""

    async def file(self, request: AppealRequest, *, channel: str, filed_by: str) -> AppealFiled: ...


class DeadLetterSink(Protocol):
    """Keeps a record the reader cannot take, with why; raises ``PublishError`` (or a database
    error) when it could not, so the record is tried again."""

    async def dead_letter(self, record: AppealRecord, reason_code: str, reason: str) -> None: ...


def _validation_reason(exc: ValidationError) -> str:
    """What was wrong, by field, without the values (they may hold the statement)."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "record"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def decode_appeal(value: bytes | None, max_bytes: int) -> AppealRequest:
    """The appeal request in a record's value; :class:`InvalidAppealError` when there is none."""
    if not value:
        raise InvalidAppealError("the record has no value")
    if len(value) > max_bytes:
        raise InvalidAppealError(f"the record has {len(value)} bytes (at most {max_bytes})")
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise InvalidAppealError("the record's value is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidAppealError("the record's value is not a JSON object")
    try:
        return AppealRequest.model_validate(data)
    except ValidationError as exc:
        raise InvalidAppealError(_validation_reason(exc)) from None


class AppealReader:
    """Handles one record at a time until it is filed, replayed or dead-lettered."""

    def __init__(
        self,
        desk: AppealFiler,
        dead_letters: DeadLetterSink,
        *,
        max_bytes: int,
        retry_s: float,
        on_filed: Callable[[], None] | None = None,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self._desk = desk
        self._dead_letters = dead_letters
        self._max_bytes = max_bytes
        self._retry_s = retry_s
        self._on_filed = on_filed
        self._on_refused = on_refused

    async def handle(self, record: AppealRecord) -> str:
        """Handle ``record``; returns ``filed``, ``replayed`` or the dead letter's reason code.
        Retries (forever, every ``retry_s``) while PostgreSQL or Kafka fail it."""
        while True:
            try:
                return await self._handle_once(record)
            except _TRANSIENT as exc:
                _log.warning(
                    "appeal_record_retry",
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                    error=type(exc).__name__,
                )
            except Exception as exc:
                # Not about the record: never skip it; the type only (a database error's text
                # may quote the row, statement included).
                _log.error(
                    "appeal_record_failed",
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                    exception_type=type(exc).__name__,
                )
            await asyncio.sleep(self._retry_s)

    async def _handle_once(self, record: AppealRecord) -> str:
        try:
            request = decode_appeal(record.value, self._max_bytes)
            filed = await self._desk.file(
                request, channel="kafka", filed_by=f"kafka:{record.topic}"[:128]
            )
        except AppealError as exc:
            return await self._refuse(record, exc.code, str(exc))
        except _REFUSED_BY_DATABASE as exc:
            return await self._refuse(
                record, "refused_by_database", f"PostgreSQL refused it: {type(exc).__name__}"
            )
        if not filed.created:
            return "replayed"
        if self._on_filed is not None:
            self._on_filed()
        return "filed"

    async def _refuse(self, record: AppealRecord, code: str, reason: str) -> str:
        reason = reason[:_MAX_REASON_CHARS]
        await self._dead_letters.dead_letter(record, code, reason)
        if self._on_refused is not None:
            self._on_refused(code)
        _log.warning(
            "appeal_dead_lettered",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            reason_code=code,
        )
        return code


_INSERT_DEAD_LETTER = """
INSERT INTO dead_letters (source_topic, source_partition, source_offset, reason_code, reason,
                          value_bytes)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
"""


class KafkaAppealDeadLetters:
    """Dead letters of the appeals topic: the record to ``kafka.appeal_dlq_topic`` (with its
    coordinates and reason in headers), then a ``dead_letters`` row."""

    def __init__(self, kafka: KafkaSettings, pool: asyncpg.Pool[Any]) -> None:
        self._kafka = kafka
        self._pool = pool
        self._producer: Any = None

    async def _started(self) -> Any:
        if self._producer is None:
            from aiokafka import AIOKafkaProducer

            producer = AIOKafkaProducer(
                **kafka_client_kwargs(self._kafka),
                acks="all",
                enable_idempotence=True,
                client_id="modstream-review-appeals-dlq",
            )
            try:
                await producer.start()
            except BaseException:
                with contextlib.suppress(Exception):
                    await producer.stop()
                raise
            self._producer = producer
        return self._producer

    async def dead_letter(self, record: AppealRecord, reason_code: str, reason: str) -> None:
        from aiokafka.errors import KafkaError, MessageSizeTooLargeError

        value = record.value or b""
        headers = [
            ("source_topic", record.topic.encode()),
            ("source_partition", str(record.partition).encode()),
            ("source_offset", str(record.offset).encode()),
            ("reason_code", reason_code.encode()),
            ("reason", reason.encode()[:1024]),
            ("original_bytes", str(len(value)).encode()),
        ]
        topic = self._kafka.appeal_dlq_topic
        try:
            producer = await self._started()
            try:
                await producer.send_and_wait(topic, value, key=record.key, headers=headers)
            except MessageSizeTooLargeError:
                headers.append(("metadata_only", b"true"))
                await producer.send_and_wait(topic, b"", key=None, headers=headers)
        except KafkaError as exc:
            raise PublishError(
                f"the appeals DLQ did not take a record: {type(exc).__name__}"
            ) from exc
        await self._pool.execute(
            _INSERT_DEAD_LETTER,
            record.topic,
            record.partition,
            record.offset,
            reason_code,
            reason,
            len(value),
        )

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()


async def consume_appeals(
    kafka: KafkaSettings, group_id: str, reader: AppealReader, retry_s: float
) -> None:
    """Read ``kafka.appeal_topic`` forever (until cancelled), committing each record's offset
    once :meth:`AppealReader.handle` returns; a Kafka that is away is waited for."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError

    while True:
        consumer = AIOKafkaConsumer(
            kafka.appeal_topic,
            **kafka_client_kwargs(kafka),
            group_id=group_id,
            client_id="modstream-review-appeals",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            await consumer.start()
            while True:
                batches = await consumer.getmany(timeout_ms=1000, max_records=50)
                for partition, records in batches.items():
                    for message in records:
                        await reader.handle(
                            AppealRecord(
                                topic=message.topic,
                                partition=message.partition,
                                offset=message.offset,
                                key=message.key,
                                value=message.value,
                            )
                        )
                        tp = TopicPartition(partition.topic, partition.partition)
                        await consumer.commit({tp: message.offset + 1})
        except (KafkaError, OSError) as exc:
            # A commit lost to a rebalance or a broker away: read again from the committed
            # offsets (a record handled twice is a replay).
            _log.warning("appeal_reader_restart", error=type(exc).__name__)
            await asyncio.sleep(retry_s)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
