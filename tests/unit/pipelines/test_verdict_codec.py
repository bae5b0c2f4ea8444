"""Tests for pipelines.verdict_codec: the JSON published to moderation.verdicts, the stored row."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from pipelines.attribution import AttributedSpan, ModelAttribution
from pipelines.messages import SourcePosition
from pipelines.rule_hits import RuleAction, RuleHit, RuleHitError, Severity
from pipelines.scores import ModelScores, ScoreRowError
from pipelines.verdict import DecidedBy, Decision, PolicyResult, Verdict
from pipelines.verdict_codec import (
    SCHEMA_VERSION,
    VERDICT_COLUMNS,
    encode_verdict_record,
    hits_from_json,
    record_from_row,
    row_kafka_record,
    row_key,
    scores_from_json,
    verdict_from_row,
    verdict_kafka_records,
    verdict_record,
    verdict_row,
    verdict_row_key,
)
from tests.support import stored_verdict_row

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
        "tenant": "default",
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
        "model_spans": None,
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


ROW_SENT_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _row(offset: int, *, scored: bool = True) -> dict[str, Any]:
    return stored_verdict_row(offset, scored=scored, sent_at=ROW_SENT_AT)


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


def test_pending_row_has_no_scores_or_labels() -> None:
    """A rules-only row publishes null scores and labels."""
    record = record_from_row(_row(1, scored=False))
    assert record["scores"] is None
    assert record["labels"] is None


def test_row_record_is_keyed_by_group_and_row_key_names_the_row() -> None:
    """A row's Kafka record is keyed by its group and its row key is (coordinates, sent_at)."""
    key, value = row_kafka_record(_row(3))
    assert key == b"g-1"
    assert orjson.loads(value) == record_from_row(_row(3))
    assert row_key(_row(3)) == (SourcePosition("chat.messages", 1, 3), ROW_SENT_AT)


def _stored_verdict(scored: bool) -> Verdict:
    return Verdict(
        position=SourcePosition("chat.messages", 2, 77),
        message_id="m-77",
        group_id="g-2",
        sender_id="u-9",
        sent_at=ROW_SENT_AT,
        text_sha256="cd" * 32,
        rule_hits=(RuleHit("en.spam.link", "spam", Severity.LOW, RuleAction.FLAG),),
        scores=SCORES if scored else None,
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


def _as_read(verdict: Verdict, updated_at: datetime) -> dict[str, Any]:
    """``verdict``'s row values named by column, as the outbox reads the row back."""
    row = dict(zip(VERDICT_COLUMNS, verdict_row(verdict), strict=True))
    row["reasons"] = orjson.loads(row["reasons"])  # a text[] column
    row["updated_at"] = updated_at
    return row


@pytest.mark.parametrize("scored", [True, False])
def test_a_relayed_record_equals_the_one_published_first(scored: bool) -> None:
    """What is stored for a verdict, read back by the relay, is the very record the worker
    published (``verdict_record``): the two serialisations cannot drift apart."""
    verdict = _stored_verdict(scored)
    updated = datetime(2026, 12, 2, 12, 7, tzinfo=UTC)
    assert record_from_row(_as_read(verdict, updated)) == verdict_record(
        verdict, created_at=updated
    )
    assert row_key(_as_read(verdict, updated)) == verdict_row_key(verdict)


def test_verdict_records_and_row_records_agree_byte_for_byte() -> None:
    """The stream's Kafka record and the relay's are the same bytes under the same key."""
    verdict = _stored_verdict(True)
    updated = datetime(2026, 12, 2, 12, 7, tzinfo=UTC)
    assert verdict_kafka_records([verdict], created_at=updated) == [
        row_kafka_record(_as_read(verdict, updated))
    ]


def test_row_has_one_value_per_column() -> None:
    """verdict_row fills every column, the batch id as a UUID and JSON columns as text."""
    row = dict(zip(VERDICT_COLUMNS, verdict_row(_stored_verdict(True)), strict=True))
    assert row["batch_id"] == uuid.UUID(int=9)
    assert orjson.loads(row["rule_hits"]) == [HIT_AS_STORED]
    assert row["toxicity_label"] == "none"
    assert "text" not in VERDICT_COLUMNS


HIT_AS_STORED = {"rule_id": "en.spam.link", "category": "spam", "severity": "low", "action": "flag"}


def test_hits_round_trip_through_their_stored_form() -> None:
    """``hits_from_json(hit.as_dict())`` gives the hit back."""
    hit = RuleHit("en.spam.1", "spam", Severity.HIGH, RuleAction.FLAG)
    assert hits_from_json([hit.as_dict()]) == (hit,)
    assert "yields_to_model" not in hit.as_dict()
    words = RuleHit("en.words", "offensive", Severity.MEDIUM, RuleAction.FLAG, True)
    assert words.as_dict()["yields_to_model"] is True
    assert hits_from_json([words.as_dict()]) == (words,)


@pytest.mark.parametrize("scored", [True, False])
def test_a_stored_row_reads_back_as_the_verdict_that_was_stored(scored: bool) -> None:
    """``verdict_from_row`` inverts ``verdict_row``: the online service answers a repeat with
    the very verdict its first call stored."""
    verdict = _stored_verdict(scored)
    row = _as_read(verdict, datetime(2026, 12, 2, 12, 5, tzinfo=UTC))
    assert verdict_from_row(row) == verdict


HARMFUL = ModelScores(
    sentiment=(0.8, 0.1, 0.1),
    intent=(0.9, 0.05, 0.03, 0.02),
    toxicity=(0.2, 0.7, 0.1),
    harms=(0.91, 0.04, 0.0, 0.125, 0.5),
)


def test_harms_are_stored_published_and_read_back() -> None:
    """A verdict from a model with HARMS stores and publishes ``scores.harms`` by label, and the
    stored row reads back as the same verdict, harms included."""
    verdict = replace(_stored_verdict(True), scores=HARMFUL)
    row = _as_read(verdict, datetime(2026, 12, 2, 12, 5, tzinfo=UTC))
    assert orjson.loads(row["scores"])["harms"] == {
        "insult": 0.91,
        "threat": 0.04,
        "self_harm": 0.0,
        "self_harm_incitement": 0.125,
        "sexual_solicitation": 0.5,
    }
    assert verdict_from_row(row) == verdict
    assert scores_from_json(row["scores"]) == HARMFUL
    record = verdict_record(verdict, created_at=CREATED)
    assert record["scores"] == HARMFUL.as_dict()
    assert record["labels"] == {"sentiment": "negative", "intent": "chat", "toxicity": "offensive"}
    assert record_from_row(row) == verdict_record(verdict, created_at=row["updated_at"])


def test_a_row_stored_before_harms_reads_back_without_them() -> None:
    """Scores stored by a model without HARMS (no ``harms`` key) decode with ``harms=None``,
    from text or from the driver's parsed value."""
    stored = '{"sentiment": {"negative": 0.1, "neutral": 0.2, "positive": 0.7}, '
    stored += '"intent": {"chat": 0.1, "question": 0.1, "spam": 0.1, "advertisement": 0.7}, '
    stored += '"toxicity": {"none": 0.9, "offensive": 0.05, "hate": 0.05}}'
    assert scores_from_json(stored) == SCORES
    assert scores_from_json(orjson.loads(stored)) == SCORES
    assert SCORES.harms is None


def test_stored_harms_that_break_the_contract_are_refused() -> None:
    """A stored ``harms`` value out of [0, 1] is a ``ScoreRowError``, as a model's would be."""
    stored = orjson.loads(orjson.dumps(HARMFUL.as_dict()))
    stored["harms"]["threat"] = 1.5
    with pytest.raises(ScoreRowError, match="HARMS"):
        scores_from_json(stored)


SPANNED = RuleHit(
    "en.offensive.1", "offensive", Severity.HIGH, RuleAction.BLOCK, spans=((5, 12), (13, 16))
)


def test_spans_round_trip_through_stored_and_published_forms() -> None:
    """A hit's spans are stored and published as ``[[start, end], ...]`` and read back as the
    same hit; the published record holds offsets, never text."""
    assert SPANNED.as_dict()["spans"] == [[5, 12], [13, 16]]
    assert hits_from_json([SPANNED.as_dict()]) == (SPANNED,)
    verdict = replace(_stored_verdict(True), rule_hits=(SPANNED,))
    updated = datetime(2026, 12, 2, 12, 7, tzinfo=UTC)
    row = _as_read(verdict, updated)
    assert verdict_from_row(row) == verdict
    record = verdict_record(verdict, created_at=updated)
    assert record["rule_hits"] == [SPANNED.as_dict()]
    assert record_from_row(row) == record


def test_a_hit_stored_before_spans_reads_back_without_them() -> None:
    """Rows written before spans were kept (no ``spans`` key) still read, with no spans, and
    a hit without spans keeps the stored form it always had."""
    (hit,) = hits_from_json([HIT_AS_STORED])
    assert hit.spans == ()
    assert hit.as_dict() == HIT_AS_STORED


@pytest.mark.parametrize(
    "spans",
    ["0-3", [[3, 3]], [[4, 2]], [[-1, 2]], [[0, 1, 2]], [["0", "1"]], [[True, 2]], [5]],
)
def test_stored_spans_that_are_not_offsets_are_refused(spans: object) -> None:
    """Spans that are not ordered, non-empty pairs of non-negative integers are a typed
    ``RuleHitError`` (a ``PipelineError``), not a hit with nonsense offsets."""
    with pytest.raises(RuleHitError):
        hits_from_json([{**HIT_AS_STORED, "spans": spans}])


def test_model_spans_are_stored_published_and_read_back_as_offsets() -> None:
    """An escalated verdict's model spans go into the row and the record as offsets, output
    name and drop (no text), the relay's record equals the first one, and the row reads back
    as the same verdict; a row stored before the column reads back without them."""
    spans = ModelAttribution(
        "toxicity.hate", (AttributedSpan(5, 12, 0.5), AttributedSpan(0, 4, 0.125))
    )
    verdict = replace(_stored_verdict(True), model_spans=spans)
    updated = datetime(2026, 12, 2, 12, 5, tzinfo=UTC)
    row = _as_read(verdict, updated)
    stored = {
        "output": "toxicity.hate",
        "spans": [{"span": [5, 12], "drop": 0.5}, {"span": [0, 4], "drop": 0.125}],
    }
    assert orjson.loads(row["model_spans"]) == stored
    assert verdict_record(verdict, created_at=updated)["model_spans"] == stored
    assert record_from_row(row) == verdict_record(verdict, created_at=updated)
    assert verdict_from_row(row) == verdict
    del row["model_spans"]  # read by a query from before the column
    assert verdict_from_row(row).model_spans is None
    assert record_from_row(row)["model_spans"] is None


def test_a_tenant_is_stored_published_and_read_back() -> None:
    """A verdict's tenant is a column of its row, a field of its record (the stream's and the
    relay's alike) and comes back from the row; a row from before tenants is the default's."""
    verdict = replace(_stored_verdict(True), tenant="arcade")
    row = dict(zip(VERDICT_COLUMNS, verdict_row(verdict), strict=True))
    assert row["tenant"] == "arcade"
    updated = datetime(2026, 12, 2, 12, 7, tzinfo=UTC)
    read = _as_read(verdict, updated)
    assert verdict_record(verdict, created_at=updated)["tenant"] == "arcade"
    assert record_from_row(read)["tenant"] == "arcade"
    assert verdict_from_row(read) == verdict
    old = {k: v for k, v in read.items() if k != "tenant"}
    assert verdict_from_row(old).tenant == "default"
    assert record_from_row(old)["tenant"] == "default"
