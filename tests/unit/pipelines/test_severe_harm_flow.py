"""Severe-harm messages through rules, policy and the published verdict record, end to end."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.scores import ModelScores
from pipelines.verdict_codec import encode_verdict_record
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict

ENGINE = RuleEngine(default_ruleset())
SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
CALM = ModelScores(
    sentiment=(0.7, 0.2, 0.1), intent=(0.9, 0.1, 0.0, 0.0), toxicity=(0.9, 0.08, 0.02)
)
TOXIC = ModelScores(
    sentiment=(0.9, 0.05, 0.05), intent=(0.9, 0.1, 0.0, 0.0), toxicity=(0.02, 0.9, 0.08)
)


def _record(text: str, scores: ModelScores | None) -> dict[str, object]:
    message = ChatMessage("m-1", "g-1", "u-1", text, SENT_AT)
    outcome = ENGINE.evaluate(message)
    # The worker's own factory: rule-decided messages reach it without scores.
    verdict = make_verdict(
        MessageFacts.of(SourcePosition("chat.messages", 0, 7), message),
        outcome,
        None if outcome.is_decisive else scores,
        PolicyThresholds(),
        ModelRun("moderation", "1") if not outcome.is_decisive else NO_MODEL,
        queue_ms=1.0,
    )
    encoded = encode_verdict_record(verdict, created_at=SENT_AT)
    assert text.encode() not in encoded
    record: dict[str, object] = orjson.loads(encoded)
    return record


@pytest.mark.parametrize(
    ("text", "scores", "decision", "category", "priority"),
    [
        ("i want to kill myself, fuck everything", TOXIC, "flag", "self_harm", 1.0),
        ("我真的想死了", CALM, "flag", "self_harm", 1.0),
        ("selling cp links", None, "block", "sexual_exploitation_minors", 1.0),
        ("出售幼女色情视频", None, "block", "sexual_exploitation_minors", 1.0),
        ("i know where you live", CALM, "flag", "threat", 0.85),
        ("我要杀你全家", None, "block", "threat", 1.0),
        ("go kill yourself", None, "block", "self_harm_incitement", 0.85),
        ("i will post your nudes online", None, "block", "sexual_exploitation", 1.0),
    ],
)
def test_published_record_names_the_severe_category(
    text: str, scores: ModelScores | None, decision: str, category: str, priority: float
) -> None:
    """The record carries the decision, the severe category, escalation and its priority."""
    record = _record(text, scores)
    assert record["decision"] == decision
    assert record["category"] == category
    assert record["escalate"] is True
    assert record["priority"] == pytest.approx(priority)
    hits = record["rule_hits"]
    assert isinstance(hits, list)
    assert category in {hit["category"] for hit in hits}


def test_ordinary_talk_is_not_escalated() -> None:
    """Everyday hyperbole publishes an allow with no category and no escalation."""
    record = _record("this game is killing me, i could kill for a coffee", CALM)
    assert (record["decision"], record["category"], record["escalate"]) == ("allow", None, False)
