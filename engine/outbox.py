"""The verdict outbox relay: rows stored but never marked published are published again.

A verdict row is the outbox entry (``verdicts.published``): the batch transaction stores it,
then the worker publishes it and marks it. When Kafka refused the publish, or the worker died in
between, the row stays ``published = false``; this relay finds rows unpublished for a while (at
start and every ``outbox_interval_s``) and sends them again. Delivery to ``moderation.verdicts``
is therefore at least once: consumers dedupe on ``(source_topic, source_partition,
source_offset)`` and keep the record with the latest ``updated_at`` (a re-scored verdict
supersedes its ``pending_model`` version).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from common.logs import get_logger
from common.publishing import PublishDeferred, PublishedMarker, RecordPublisher
from engine.stores.database import StoreError
from engine.verdict_publishing import durable_rows, verdict_publishing
from pipelines.verdict_codec import VerdictRowKey

__all__ = ["VerdictOutbox"]

_log = get_logger(__name__)


class _Store(PublishedMarker[VerdictRowKey], Protocol):
    async def unpublished(
        self,
        min_age_s: float,
        limit: int,
        topic: str | None = None,
        partitions: Sequence[int] | None = None,
        rescan_id: uuid.UUID | None = None,
    ) -> list[dict[str, Any]]: ...


class VerdictOutbox:
    """Re-publishes verdict rows left unpublished (see the module docstring)."""

    def __init__(
        self,
        store: _Store,
        publisher: RecordPublisher,
        verdict_topic: str,
        *,
        min_age_s: float,
        batch_items: int,
        on_relayed: Callable[[int], None] | None = None,
        on_backlog: Callable[[int], None] | None = None,
    ) -> None:
        self._store = store
        self._on_relayed = on_relayed
        self._on_backlog = on_backlog
        self._page = 0
        """Rows of the page being relayed: what is left behind when its publish fails."""
        self._verdicts_out = verdict_publishing(publisher, verdict_topic, store)
        self._min_age_s = min_age_s
        self._batch_items = batch_items

    async def relay_once(
        self,
        source_topic: str | None = None,
        partitions: Sequence[int] | None = None,
        rescan_id: uuid.UUID | None = None,
    ) -> int:
        """Publish one page of old unpublished rows and mark them; returns how many.

        Raises ``StoreError`` when the rows cannot be read and ``PublishDeferred`` when they
        could not be published and marked (they stay for the next round).
        """
        rows = await self._store.unpublished(
            self._min_age_s, self._batch_items, source_topic, partitions, rescan_id
        )
        if not rows:
            return 0
        self._page = len(rows)
        await self._verdicts_out.publish(durable_rows(rows))
        self._page = 0
        if self._on_relayed is not None:
            self._on_relayed(len(rows))
        _log.info("verdicts_relayed", items=len(rows))
        return len(rows)

    async def relay_all(
        self,
        source_topic: str | None = None,
        partitions: Sequence[int] | None = None,
        rescan_id: uuid.UUID | None = None,
    ) -> int:
        """Relay page after page until nothing old is left unpublished (of ``source_topic``,
        ``partitions``, rescan ``rescan_id``, where given)."""
        total = 0
        while True:
            n = await self.relay_once(source_topic, partitions, rescan_id)
            total += n
            if n < self._batch_items:
                return total

    def _report_backlog(self, rows: int) -> None:
        if self._on_backlog is not None:
            self._on_backlog(rows)

    async def run(
        self,
        done: asyncio.Event,
        interval_s: float,
        source_topic: str,
        partitions: Callable[[], Sequence[int]],
    ) -> None:
        """Relay at start and every ``interval_s`` until ``done``; outages are logged, not fatal.

        After each round ``on_backlog`` hears how many rows it left unpublished: 0 when it
        emptied the outbox, else the page whose publish failed (a lower bound)."""
        while not done.is_set():
            owned = list(partitions())
            if owned:
                try:
                    await self.relay_all(source_topic, owned)
                    self._report_backlog(0)
                except (StoreError, PublishDeferred) as exc:
                    _log.warning("outbox_relay_deferred", error=str(exc))
                    self._report_backlog(self._page)
                    self._page = 0
            # Until partitions are assigned, look again soon: the first relay runs at start.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), interval_s if owned else 0.5)
