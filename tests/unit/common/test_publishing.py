"""Tests for common.publishing: stored records are sent, then marked; failures defer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from common.publishing import (
    DurableRecord,
    PublishAfterDurable,
    PublishDeferred,
    PublishError,
)


class StoreDown(Exception):
    """The fake store's "try later" error."""


class FakePublisher:
    def __init__(self, events: list[str], *, fail: bool = False) -> None:
        self.events = events
        self.fail = fail
        self.sent: list[tuple[str, bytes | None, bytes]] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.events.append("publish")
        if self.fail:
            raise PublishError("broker away")
        self.sent.extend((topic, k, v) for k, v in records)


class FakeMarker:
    def __init__(self, events: list[str], error: Exception | None = None) -> None:
        self.events = events
        self.error = error
        self.marked: list[int] = []

    async def mark_published(self, keys: Sequence[int]) -> None:
        self.events.append("mark")
        if self.error is not None:
            raise self.error
        self.marked.extend(keys)


RECORDS = [DurableRecord(1, b"g", b"one"), DurableRecord(2, None, b"two")]


async def test_records_are_sent_then_marked() -> None:
    """Every record reaches the topic with its key, and only then are all refs marked."""
    events: list[str] = []
    publisher, marker = FakePublisher(events), FakeMarker(events)
    publishing = PublishAfterDurable(
        publisher, "t", marker, after_send=lambda: events.append("hook")
    )
    assert await publishing.publish(RECORDS) == 2
    assert publisher.sent == [("t", b"g", b"one"), ("t", None, b"two")]
    assert marker.marked == [1, 2]
    assert events == ["publish", "hook", "mark"]


async def test_nothing_to_send_touches_nothing() -> None:
    """An empty list neither publishes nor marks."""
    events: list[str] = []
    publishing = PublishAfterDurable(FakePublisher(events), "t", FakeMarker(events))
    assert await publishing.publish([]) == 0
    assert events == []


async def test_kafka_refusal_marks_nothing_and_defers() -> None:
    """When Kafka refuses, PublishDeferred is raised and no record is marked."""
    events: list[str] = []
    marker = FakeMarker(events)
    publishing = PublishAfterDurable(FakePublisher(events, fail=True), "t", marker)
    with pytest.raises(PublishDeferred, match="broker away") as caught:
        await publishing.publish(RECORDS)
    assert isinstance(caught.value.__cause__, PublishError)
    assert marker.marked == []
    assert events == ["publish"]


async def test_a_store_error_named_retriable_defers() -> None:
    """A marker error listed in store_errors becomes PublishDeferred (the relay resends)."""
    events: list[str] = []
    publishing = PublishAfterDurable(
        FakePublisher(events),
        "t",
        FakeMarker(events, StoreDown("pg away")),
        store_errors=(StoreDown,),
    )
    with pytest.raises(PublishDeferred, match="pg away"):
        await publishing.publish(RECORDS)


async def test_other_marker_errors_propagate_unchanged() -> None:
    """A marker error not listed in store_errors is not hidden as a deferral."""
    events: list[str] = []
    publishing = PublishAfterDurable(
        FakePublisher(events), "t", FakeMarker(events, ValueError("bug")), store_errors=(StoreDown,)
    )
    with pytest.raises(ValueError, match="bug"):
        await publishing.publish(RECORDS)
