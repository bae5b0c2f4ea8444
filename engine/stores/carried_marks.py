"""Published marks carried by the next verdict write instead of a statement of their own.

Once Kafka has acknowledged a group of verdicts, their rows are marked ``published``. Sent
alone, that mark is one more PostgreSQL statement (and round trip) for every write: the stream
wrote each batch, then marked it, two statements per batch. Here the processor's marker only
queues the keys; the next verdict statement (``engine.stores.verdict_batches``, the one write
of the stream and of the online service) takes them and marks them as its last part, in the same
round trip and the same transaction. Under load a write follows within milliseconds; a mark no
write has taken after ``wait_s`` is sent alone (:meth:`CarriedMarks.send_overdue`, called by
:meth:`CarriedMarks.run` in the stream and by the online service's publishing loop), and what is
queued when the service stops is sent alone after its last publish.

A mark is only ever late, never wrong: the rows it names were stored by earlier statements and
published. If the statement carrying it fails, the keys are queued again for the next one. A
mark that never lands (PostgreSQL away, or the process killed while it waited) leaves its rows
``published = false``, and the outbox relay sends them again after ``outbox_min_age_s``: at
least once, as after any publish whose mark failed, and only those rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from common.logs import get_logger
from common.publishing import PublishedMarker
from engine.stores.database import StoreError
from pipelines.verdict_codec import VerdictRowKey

__all__ = ["CarriedMarks"]

_log = get_logger(__name__)


class CarriedMarks:
    """The processor's published-marker for verdict rows (see the module docstring); ``store``
    sends the marks no write carried (``engine.stores.verdict_outbox``)."""

    def __init__(
        self,
        store: PublishedMarker[VerdictRowKey],
        *,
        wait_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if wait_s <= 0:
            raise ValueError("wait_s must be > 0")
        self._store = store
        self._wait_s = wait_s
        self._clock = clock
        self._keys: list[VerdictRowKey] = []
        self._since: float | None = None
        """When the oldest key still queued was queued (``None``: nothing queued)."""
        self.sent_alone = 0
        """Marks sent as statements of their own (the rest rode on a verdict write)."""

    async def mark_published(self, keys: Sequence[VerdictRowKey]) -> None:
        """Queue ``keys`` for the next verdict write (or the next lone mark)."""
        if not keys:
            return
        if self._since is None:
            self._since = self._clock()
        self._keys.extend(keys)

    def take(self) -> list[VerdictRowKey]:
        """Everything queued, for a statement to carry; the queue is empty after."""
        keys, self._keys, self._since = self._keys, [], None
        return keys

    def put_back(self, keys: Sequence[VerdictRowKey]) -> None:
        """Keys a failed statement took: they go with the next one."""
        if not keys:
            return
        self._keys[:0] = keys
        self._since = self._clock() if self._since is None else self._since

    async def send_overdue(self) -> None:
        """Send alone what has waited ``wait_s`` without a write to carry it."""
        since = self._since
        if since is not None and self._clock() - since >= self._wait_s:
            await self.send_alone()

    async def send_alone(self) -> None:
        """Send everything queued as a statement of its own (the service stops: after its
        last publish)."""
        keys = self.take()
        if not keys:
            return
        self.sent_alone += 1
        try:
            await self._store.mark_published(keys)
        except StoreError as exc:
            # The rows stay unpublished: the outbox relay sends them again later.
            _log.warning("published_mark_deferred", error=str(exc), items=len(keys))

    async def run(self, done: asyncio.Event) -> None:
        """Send the overdue marks every ``wait_s`` until ``done`` (the service's batches have
        all finished), then everything still queued (the stream's loop; the online service's
        publishing loop calls the two steps itself, after each of its publishes)."""
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._wait_s)
            await self.send_overdue()
        await self.send_alone()
