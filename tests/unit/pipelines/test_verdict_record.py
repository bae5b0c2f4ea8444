"""Tests for pipelines.verdict_record: the JSON published to moderation.verdicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

from pipelines.messages import SourcePosition
from pipelines.rule_hits import RuleAction, RuleHit, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision, PolicyResult, Verdict
from pipelines.verdict_record import SCHEMA_VERSION, encode_verdict_record, verdict_record

CREATED = datetime(2026, 5, 1, 12, 0, 1, 500000, tzinfo=UTC)
HIT = RuleHit("zh.ad.add_contact", "advertisement", Severity.MEDIUM, RuleAction.FLAG)
SCORES = ModelScores(
    sentiment=(0.1, 0.2, 0.7), intent=(0.1, 0.1, 0.1, 0.7), toxicity=(0.9, 0.05, 0.05)
)


def _verdict(scores: ModelScores | None = SCORES) -> Verdict:
    return Verdict(
        position=SourcePosition("chat.messages", 3, 1234),
        message_id="m-1",
        group_id="g-1",
        sender_id="u-1",
        sent_at=datetime(2026, 5, 1, 20, 0, tzinfo=timezone(timedelta(hours=8))),
        text_sha256="ab" * 32,
        rule_hits=(HIT,),
        scores=scores,
        result=PolicyResult(
            decision=Decision.FLAG,
            decided_by=DecidedBy.MODEL,
            escalate=False,
            category="advertisement",
            priority=0.58,
            reasons=("rule:zh.ad.add_contact", "intent.advertisement=0.700>=0.7"),
        ),
        model_name="moderation",
        model_version="1",
        batch_id="b-9",
        queue_ms=12.5,
        inference_ms=40.0,
    )


def test_record_fields() -> None:
    """Every documented field is present with the verdict's values."""
    record = verdict_record(_verdict(), created_at=CREATED)
    assert record == {
        "schema_version": SCHEMA_VERSION,
        "message_id": "m-1",
        "group_id": "g-1",
        "sender_id": "u-1",
        "source_topic": "chat.messages",
        "source_partition": 3,
        "source_offset": 1234,
        "decision": "flag",
        "decided_by": "model",
        "escalate": False,
        "category": "advertisement",
        "priority": 0.58,
        "reasons": ["rule:zh.ad.add_contact", "intent.advertisement=0.700>=0.7"],
        "rule_hits": [
            {
                "rule_id": "zh.ad.add_contact",
                "category": "advertisement",
                "severity": "medium",
                "action": "flag",
            }
        ],
        "scores": SCORES.as_dict(),
        "labels": {"sentiment": "positive", "intent": "advertisement", "toxicity": "none"},
        "model_name": "moderation",
        "model_version": "1",
        "batch_id": "b-9",
        "sent_at": "2026-05-01T12:00:00Z",
        "created_at": "2026-05-01T12:00:01.500000Z",
    }


def test_record_without_scores() -> None:
    """A rules-only verdict publishes null scores and labels."""
    record = verdict_record(_verdict(scores=None), created_at=CREATED)
    assert record["scores"] is None
    assert record["labels"] is None


def test_record_never_contains_text_or_hash() -> None:
    """Neither the text nor its hash is published."""
    encoded = encode_verdict_record(_verdict(), created_at=CREATED)
    assert b"abab" not in encoded
    assert b"text" not in encoded


def test_encoded_round_trips() -> None:
    """The encoded bytes are JSON equal to the record, with plain strings for enums."""
    encoded = encode_verdict_record(_verdict(), created_at=CREATED)
    assert orjson.loads(encoded) == verdict_record(_verdict(), created_at=CREATED)
    assert orjson.loads(encoded)["decision"] == "flag"


def test_naive_created_at_is_rejected() -> None:
    """created_at must be timezone-aware."""
    with pytest.raises(ValueError, match="timezone-aware"):
        verdict_record(_verdict(), created_at=datetime(2026, 5, 1))
