"""Tests for worker.outbox: stored rows become verdict records again, published then marked."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from common.publishing import PublishDeferred, PublishError
from pipelines.messages import SourcePosition
from worker.outbox import VerdictOutbox

SENT_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _row(offset: int, *, scored: bool = True) -> dict[str, Any]:
    return {
        "source_topic": "chat.messages",
        "source_partition": 1,
        "source_offset": offset,
        "sent_at": SENT_AT,
        "message_id": f"m-{offset}",
        "group_id": "g-1",
        "sender_id": "u-1",
        "decision": "flag",
        "decided_by": "model" if scored else "pending_model",
        "escalated": False,
        "category": "spam" if scored else None,
        "priority": 0.25,
        "reasons": ["spam>=0.70"] if scored else ["model:pending"],
        "rule_hits": '[{"rule_id": "r1", "category": "spam", "severity": "low", "action": "flag"}]',
        "scores": '{"toxicity": {"none": 0.9, "offensive": 0.05, "hate": 0.05}}'
        if scored
        else None,
        "sentiment_label": "neutral" if scored else None,
        "intent_label": "spam" if scored else None,
        "toxicity_label": "none" if scored else None,
        "model_name": "moderation" if scored else None,
        "model_version": "1" if scored else None,
        "batch_id": uuid.UUID(int=7) if scored else None,
        "created_at": SENT_AT,
        "updated_at": datetime(2026, 12, 2, 12, 5, tzinfo=UTC),
    }


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
    ) -> list[dict[str, Any]]:
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
