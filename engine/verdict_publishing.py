"""Stored verdicts on their way to ``moderation.verdicts`` (publish after durable, for verdicts).

The stream and the re-scorer publish verdicts right after their transaction; the outbox relay
publishes rows read back later. All three go through one :class:`PublishAfterDurable` over the
verdict outbox store, with records from the one verdict codec, so a verdict is published and
marked the same way whoever sends it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from common.logs import get_logger
from common.publishing import (
    DurableRecord,
    PublishAfterDurable,
    PublishDeferred,
    PublishedMarker,
    RecordPublisher,
)
from engine.stores.database import StoreError
from pipelines.verdict import Verdict
from pipelines.verdict_codec import (
    VerdictRowKey,
    row_kafka_record,
    row_key,
    verdict_kafka_records,
    verdict_row_key,
)

__all__ = ["durable_rows", "durable_verdicts", "publish_just_stored", "verdict_publishing"]

_log = get_logger(__name__)


def verdict_publishing(
    publisher: RecordPublisher,
    verdict_topic: str,
    outbox: PublishedMarker[VerdictRowKey],
    *,
    after_send: Callable[[], None] | None = None,
) -> PublishAfterDurable[VerdictRowKey]:
    """Publish-after-durable for verdict rows; a store error while marking defers to the relay."""
    return PublishAfterDurable(
        publisher, verdict_topic, outbox, store_errors=(StoreError,), after_send=after_send
    )


def durable_verdicts(
    verdicts: Sequence[Verdict], *, created_at: datetime
) -> list[DurableRecord[VerdictRowKey]]:
    """Just-stored verdicts as records to publish (``created_at``: when they were decided)."""
    records = verdict_kafka_records(verdicts, created_at=created_at)
    return [
        DurableRecord(verdict_row_key(v), key, value)
        for v, (key, value) in zip(verdicts, records, strict=True)
    ]


def durable_rows(rows: Sequence[Mapping[str, Any]]) -> list[DurableRecord[VerdictRowKey]]:
    """Verdict rows read back from the outbox as records to publish."""
    return [DurableRecord(row_key(r), *row_kafka_record(r)) for r in rows]


async def publish_just_stored(
    out: PublishAfterDurable[VerdictRowKey], verdicts: Sequence[Verdict], *, deferred_event: str
) -> None:
    """Publish verdicts just stored (decided now); when Kafka or the marking fails they stay
    ``published = false`` for the outbox relay, logged as ``deferred_event``."""
    try:
        await out.publish(durable_verdicts(verdicts, created_at=datetime.now(UTC)))
    except PublishDeferred as exc:
        _log.warning(deferred_event, error=str(exc), items=len(verdicts))
