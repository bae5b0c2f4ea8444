"""Tests for worker.outbox: stored rows become verdict records again, published then marked."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from pipelines.messages import SourcePosition
from pipelines.rule_hits import RuleAction, RuleHit, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision, PolicyResult, Verdict
from pipelines.verdict_record import verdict_record
from worker.outbox import VerdictOutbox, record_from_row
from worker.publisher import PublishError
from worker.sink import _INSERT_VERDICTS, _verdict_columns

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


def test_record_from_row_has_the_published_fields() -> None:
    """A model-scored row maps to the verdict record: coordinates, labels, parsed JSON columns,
    ``created_at`` from the row's last update, and no text."""
    record = record_from_row(_row(5))
    assert record["source_offset"] == 5
    assert record["decided_by"] == "model"
    assert record["labels"] == {"sentiment": "neutral", "intent": "spam", "toxicity": "none"}
    assert record["rule_hits"] == [
        {"rule_id": "r1", "category": "spam", "severity": "low", "action": "flag"}
    ]
    assert record["batch_id"] == str(uuid.UUID(int=7))
    assert record["created_at"] == "2026-12-02T12:05:00Z"
    assert "text" not in record


def _stored_row(verdict: Verdict, updated_at: datetime) -> dict[str, Any]:
    """The columns the sink writes for ``verdict`` (named as in its INSERT), as a row reads."""
    names = re.search(r"INSERT INTO verdicts \((.*?)\)", _INSERT_VERDICTS, re.S)
    assert names is not None
    columns = [n.strip() for n in names.group(1).split(",")]
    row = {n: col[0] for n, col in zip(columns, _verdict_columns([verdict]), strict=True)}
    row["reasons"] = orjson.loads(row["reasons"])  # a text[] column
    row["updated_at"] = updated_at
    return row


@pytest.mark.parametrize("scored", [True, False])
def test_a_relayed_record_equals_the_one_published_first(scored: bool) -> None:
    """What the sink stores for a verdict, read back by the relay, is the very record the worker
    published (``verdict_record``): the two serialisations cannot drift apart."""
    verdict = Verdict(
        position=SourcePosition("chat.messages", 2, 77),
        message_id="m-77",
        group_id="g-2",
        sender_id="u-9",
        sent_at=SENT_AT,
        text_sha256="cd" * 32,
        rule_hits=(RuleHit("en.spam.link", "spam", Severity.LOW, RuleAction.FLAG),),
        scores=ModelScores(
            sentiment=(0.1, 0.2, 0.7), intent=(0.1, 0.1, 0.1, 0.7), toxicity=(0.9, 0.05, 0.05)
        )
        if scored
        else None,
        result=PolicyResult(
            decision=Decision.FLAG,
            decided_by=DecidedBy.MODEL if scored else DecidedBy.PENDING_MODEL,
            escalate=True,
            category="advertisement",
            priority=0.5,
            reasons=("rule:en.spam.link", "intent.advertisement=0.700>=0.7"),
        ),
        model_name="moderation" if scored else None,
        model_version="1" if scored else None,
        batch_id=str(uuid.UUID(int=9)) if scored else None,
        queue_ms=3.0,
        inference_ms=20.0 if scored else None,
    )
    updated = datetime(2026, 12, 2, 12, 7, tzinfo=UTC)
    assert record_from_row(_stored_row(verdict, updated)) == verdict_record(
        verdict, created_at=updated
    )


def test_pending_row_has_no_scores_or_labels() -> None:
    """A rules-only row publishes null scores and labels."""
    record = record_from_row(_row(1, scored=False))
    assert record["scores"] is None
    assert record["labels"] is None


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
    with pytest.raises(PublishError):
        await outbox.relay_once()
    assert store.marked == []
