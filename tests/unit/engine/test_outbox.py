"""Tests for engine.outbox: stored rows become verdict records again, published then marked."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from common.publishing import PublishDeferred, PublishError
from engine.outbox import VerdictOutbox
from pipelines.messages import SourcePosition
from tests.support import stored_verdict_row

SENT_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _row(offset: int, *, scored: bool = True) -> dict[str, Any]:
    return stored_verdict_row(offset, scored=scored, sent_at=SENT_AT)


class FakeStore:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.marked: list[tuple[SourcePosition, datetime]] = []
        self.queries: list[tuple[float, int, str | None, list[int] | None]] = []

    async def unpublished(
        self,
        min_age_s: float,
        limit: int,
        topic: str | None = None,
        partitions: Sequence[int] | None = None,
        rescan_id: uuid.UUID | None = None,
    ) -> list[dict[str, Any]]:
        assert rescan_id is None  # the live relay never narrows to one rescan
        self.queries.append((min_age_s, limit, topic, list(partitions) if partitions else None))
        done = {(p.partition, p.offset) for p, _ in self.marked}
        left = [r for r in self.rows if (r["source_partition"], r["source_offset"]) not in done]
        return left[:limit]

    async def mark_published(self, keys: Sequence[tuple[SourcePosition, datetime]]) -> None:
        self.marked.extend(keys)


class FakePublisher:
    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.sent: list[tuple[str, bytes | None, bytes]] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        if self.fail:
            raise PublishError("broker away")
        self.sent.extend((topic, k, v) for k, v in records)


async def test_relay_publishes_every_page_then_marks() -> None:
    """relay_all sends all old unpublished rows page by page, keyed by group, and marks them."""
    store = FakeStore([_row(i) for i in range(5)])
    publisher = FakePublisher()
    outbox = VerdictOutbox(store, publisher, "moderation.verdicts", min_age_s=3, batch_items=2)
    assert await outbox.relay_all("chat.messages", [1]) == 5
    assert [orjson.loads(v)["source_offset"] for _, _, v in publisher.sent] == [0, 1, 2, 3, 4]
    assert all(k == b"g-1" for _, k, _ in publisher.sent)
    assert len(store.marked) == 5
    assert store.queries[0] == (3, 2, "chat.messages", [1])


async def test_failed_publish_marks_nothing() -> None:
    """When Kafka refuses, rows stay unmarked (to be sent by a later round)."""
    store = FakeStore([_row(1)])
    outbox = VerdictOutbox(
        store, FakePublisher(fail=True), "moderation.verdicts", min_age_s=0, batch_items=10
    )
    with pytest.raises(PublishDeferred):
        await outbox.relay_once()
    assert store.marked == []


async def test_each_round_reports_the_rows_it_left_unpublished() -> None:
    """A round against a broker that refuses reports the failed page (3 rows) as the backlog;
    the next round, with the broker back, publishes them and reports 0."""
    import asyncio

    store = FakeStore([_row(i) for i in range(3)])
    publisher = FakePublisher(fail=True)
    backlog: list[int] = []
    done = asyncio.Event()

    def report(rows: int) -> None:
        backlog.append(rows)
        done.set()  # one round per run below

    outbox = VerdictOutbox(
        store, publisher, "moderation.verdicts", min_age_s=0, batch_items=10, on_backlog=report
    )
    await asyncio.wait_for(outbox.run(done, 0.01, "chat.messages", lambda: [1]), 5)
    assert backlog == [3]
    publisher.fail = False
    done.clear()
    await asyncio.wait_for(outbox.run(done, 0.01, "chat.messages", lambda: [1]), 5)
    assert backlog == [3, 0]
    assert len(store.marked) == 3
