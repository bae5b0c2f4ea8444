"""Published marks carried by the next verdict write instead of a statement of their own.

Once Kafka has acknowledged a group of online verdicts, their rows are marked ``published``
(``engine.stores.verdict_outbox``). Sent alone, that mark is one more PostgreSQL round trip for
every write: at 500 calls/s on the 2-core development box it was about 6 % of the service's
CPU (BENCHMARKS.md, "Online"). Here the processor's marker only queues the keys; the next
verdict statement (``online.claimed_writes``) takes them and marks them as one more of its
parts, in the same round trip. Under load a write follows within milliseconds; a mark no write
has taken after ``wait_s`` is sent alone (:meth:`CarriedMarks.send_overdue`, called by the
service's publishing loop, ``online.paced_publishing``), and what is queued when the service
stops is sent alone after its last publish.

A mark is only ever late, never wrong: the rows it names were stored by earlier statements and
published. If the statement carrying it fails, the keys are queued again for the next one; a
mark lost with PostgreSQL away leaves its rows ``published = false``, and the outbox relay sends
them again after ``outbox_min_age_s`` (at least once, as after any publish whose mark failed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from common.logs import get_logger
from common.publishing import PublishedMarker
from engine.stores.database import StoreError
from pipelines.verdict_codec import VerdictRowKey

__all__ = ["CarriedMarks", "MarkStore"]

_log = get_logger(__name__)


class MarkStore(PublishedMarker[VerdictRowKey], Protocol):
    """The verdict outbox as the marks use it (``engine.stores.verdict_outbox``)."""

    def mark_part(self, keys: Sequence[VerdictRowKey]) -> tuple[str, list[Any]]: ...


class CarriedMarks:
    """The processor's published-marker for online rows (see the module docstring)."""

    def __init__(
        self,
        store: MarkStore,
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

    def part(self, keys: Sequence[VerdictRowKey]) -> tuple[str, list[Any]]:
        """The mark of ``keys`` as one part of a statement (``engine.stores.one_statement``)."""
        return self._store.mark_part(keys)

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
