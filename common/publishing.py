"""Publish after durable: records already stored in Postgres go to Kafka, then are marked.

Both services keep an outbox in Postgres: the worker's ``verdicts`` rows and the review
service's ``review_decision_outbox``. A record is stored first (in its own transaction), then
sent to Kafka, then marked published. When Kafka refuses, or marking fails, nothing is lost: the
record stays unmarked and that service's relay sends it again later, so delivery is at least
once. :class:`PublishAfterDurable` is that one step, shared by every caller; it raises
:class:`PublishDeferred` whenever it leaves a record for the relay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from common.errors import CommonError

__all__ = [
    "DurableRecord",
    "PublishAfterDurable",
    "PublishDeferred",
    "PublishError",
    "PublishedMarker",
    "RecordPublisher",
]

K = TypeVar("K")
K_contra = TypeVar("K_contra", contravariant=True)


class PublishError(CommonError):
    """Kafka did not acknowledge a record; the caller keeps the work pending and retries
    (unless a subclass says the record itself is refused: ``retriable`` false)."""

    retriable = True


class PublishDeferred(CommonError):
    """Stored records were not all published and marked: the relay will send them again."""

    retriable = True


class RecordPublisher(Protocol):
    """Kafka output: the one shape every publisher has (and every test fake)."""

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Send ``(key, value)`` records and return once all are acknowledged; raise
        :class:`PublishError` otherwise."""


class PublishedMarker(Protocol[K_contra]):
    """The store side of an outbox: records it to mark published, named by their keys."""

    async def mark_published(self, keys: Sequence[K_contra]) -> None: ...


@dataclass(frozen=True, slots=True)
class DurableRecord(Generic[K]):
    """A stored record ready to send: ``ref`` names it in its store, ``key``/``value`` in Kafka."""

    ref: K
    key: bytes | None
    value: bytes


class PublishAfterDurable(Generic[K]):
    """Sends stored records to ``topic``, then marks them published in their store.

    ``store_errors`` are the marker's errors that mean "try again later" (they become
    :class:`PublishDeferred` like a Kafka refusal); any other error propagates unchanged.
    ``after_send`` runs between the acknowledgement and the mark (a fault-injection seam).
    """

    def __init__(
        self,
        publisher: RecordPublisher,
        topic: str,
        marker: PublishedMarker[K],
        *,
        store_errors: tuple[type[Exception], ...] = (),
        after_send: Callable[[], None] | None = None,
    ) -> None:
        self._publisher = publisher
        self._topic = topic
        self._marker = marker
        self._store_errors = store_errors
        self._after_send = after_send

    async def publish(self, records: Sequence[DurableRecord[K]]) -> int:
        """Send ``records`` and mark them; returns how many. Raises :class:`PublishDeferred`
        (nothing marked, or not all of it) when Kafka or the store refused."""
        if not records:
            return 0
        try:
            await self._publisher.publish(self._topic, [(r.key, r.value) for r in records])
        except PublishError as exc:
            raise PublishDeferred(str(exc)) from exc
        if self._after_send is not None:
            self._after_send()
        try:
            await self._marker.mark_published([r.ref for r in records])
        except self._store_errors as exc:
            raise PublishDeferred(str(exc)) from exc
        return len(records)
