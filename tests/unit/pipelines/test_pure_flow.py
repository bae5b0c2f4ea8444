"""The pure stages chained as the worker chains them: decode, rules, policy, verdict record."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import orjson

from pipelines.decode import decode_message
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds, decide
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.verdict import DecidedBy, Decision
from pipelines.verdict_codec import encode_verdict_record
from pipelines.verdict_factory import NO_MODEL, MessageFacts, make_verdict

TEXT = "兼职刷单\uff0c日结\uff0c加微信 abc12345"


def test_decisive_scam_flows_to_a_blocked_record_without_text() -> None:
    """A brushing-scam message is blocked by rules and its published record holds no text."""
    raw = orjson.dumps(
        {
            "message_id": "m-7",
            "group_id": "g-1",
            "sender_id": "u-9",
            "text": TEXT,
            "sent_at": "2026-05-01T20:00:00+08:00",
        }
    )
    message = decode_message(raw, max_bytes=1_048_576)
    outcome = RuleEngine(default_ruleset()).evaluate(message)
    result = decide(outcome, None, PolicyThresholds(), model_available=True)
    assert outcome.is_decisive
    assert result.decision is Decision.BLOCK
    assert result.decided_by is DecidedBy.RULES
    assert result.category == "spam"
    verdict = make_verdict(
        MessageFacts.of(SourcePosition("chat.messages", 0, 42), message),
        outcome,
        None,
        PolicyThresholds(),
        NO_MODEL,
        queue_ms=0.0,
    )
    assert verdict.result == result
    assert verdict.text_sha256 == hashlib.sha256(message.text.encode()).hexdigest()
    encoded = encode_verdict_record(verdict, created_at=datetime(2026, 5, 1, 12, tzinfo=UTC))
    record = orjson.loads(encoded)
    assert record["decision"] == "block"
    assert "rule:zh.spam.brushing" in record["reasons"]
    assert "刷单".encode() not in encoded
    assert verdict.text_sha256.encode() not in encoded
