"""Tests for pipelines.verdict_factory: the one way a verdict is made."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision
from pipelines.verdict_factory import NO_MODEL, MessageFacts, ModelRun, make_verdict, text_sha256

POSITION = SourcePosition("chat.messages", 1, 9)
MESSAGE = ChatMessage("m-9", "g-1", "u-1", "hello there", datetime(2026, 5, 1, tzinfo=UTC))
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))


def test_facts_keep_a_hash_of_the_text_not_the_text() -> None:
    """MessageFacts.of copies the message's identity and hashes its text with SHA-256."""
    facts = MessageFacts.of(POSITION, MESSAGE)
    assert facts.text_sha256 == hashlib.sha256(b"hello there").hexdigest()
    assert facts.text_sha256 == text_sha256("hello there")
    assert (facts.position, facts.message_id, facts.sender_id) == (POSITION, "m-9", "u-1")
    assert "hello there" not in repr(facts)


def test_without_scores_the_rules_decide_and_the_model_is_pending() -> None:
    """No scores: the verdict is decided by rules alone and waits for the model."""
    verdict = make_verdict(
        MessageFacts.of(POSITION, MESSAGE),
        RuleOutcome(),
        None,
        PolicyThresholds(),
        NO_MODEL,
        queue_ms=2.0,
    )
    assert verdict.result.decided_by is DecidedBy.PENDING_MODEL
    assert (verdict.model_name, verdict.batch_id, verdict.inference_ms) == (None, None, None)
    assert verdict.queue_ms == 2.0


def test_with_scores_the_model_decides_and_the_run_is_recorded() -> None:
    """Scores: the policy weighs them; the model run and the rule hits land on the verdict."""
    hit = RuleHit("en.flag.1", "spam", Severity.LOW, RuleAction.FLAG)
    run = ModelRun("moderation", "3", "b-1", 4.5)
    verdict = make_verdict(
        MessageFacts.of(POSITION, MESSAGE),
        RuleOutcome((hit,)),
        CALM,
        PolicyThresholds(),
        run,
        queue_ms=1.0,
    )
    assert verdict.result.decided_by is DecidedBy.MODEL
    assert verdict.result.decision is Decision.FLAG
    assert verdict.rule_hits == (hit,)
    assert (verdict.model_name, verdict.model_version, verdict.batch_id) == (
        "moderation",
        "3",
        "b-1",
    )
    assert verdict.inference_ms == 4.5
    assert verdict.scores == CALM
