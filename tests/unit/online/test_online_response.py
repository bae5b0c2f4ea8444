"""online.response: the gRPC answer carries every field of the verdict, as published."""

from __future__ import annotations

from datetime import UTC, datetime

from online.moderator import Answer, Latency
from online.response import check_response
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.verdict_codec import verdict_record
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict
from tests.unit.online.online_fakes import CALM, SENT_AT


def test_every_record_field_reaches_the_response() -> None:
    """Decision, reasons, hits, per-task scores and labels, model and offset are all carried."""
    hit = RuleHit(
        "en.threat.kill", "threat", Severity.HIGH, RuleAction.ESCALATE, spans=((3, 9), (10, 13))
    )
    facts = MessageFacts(SourcePosition("online", 0, 41), "m-1", "g-1", "u-1", SENT_AT, "ab" * 32)
    verdict = make_verdict(
        facts,
        RuleOutcome((hit,)),
        CALM,
        PolicyThresholds(),
        ModelRun("moderation", "3", None, 4.5),
        queue_ms=1.5,
    )
    record = verdict_record(verdict, created_at=datetime.now(UTC))
    response = check_response(Answer(verdict, False, Latency(0.2, 1.5, 4.5, 7.0)))
    assert response.message_id == "m-1"
    assert response.source_offset == 41
    assert response.escalate
    assert (response.decision, response.decided_by) == (record["decision"], "model")
    assert list(response.reasons) == record["reasons"]
    assert [(h.rule_id, h.severity, h.action) for h in response.rule_hits] == [
        ("en.threat.kill", "high", "escalate")
    ]
    published = [hit.as_dict()["spans"] for hit in verdict.rule_hits]
    assert record["rule_hits"] == [hit.as_dict() for hit in verdict.rule_hits]
    assert [[[s.start, s.end] for s in h.spans] for h in response.rule_hits] == published
    assert [(s.start, s.end) for s in response.rule_hits[0].spans] == [(3, 9), (10, 13)]
    assert response.scores["toxicity"].label == "none"
    assert response.scores["intent"].probabilities["chat"] == 1.0
    assert {task: dict(scores.probabilities) for task, scores in response.scores.items()} == record[
        "scores"
    ]
    assert {task: scores.label for task, scores in response.scores.items()} == record["labels"]
    assert response.category == (record["category"] or "")
    assert response.priority == record["priority"]
    assert (response.model_name, response.model_version) == ("moderation", "3")
    assert response.latency.total_ms == 7.0
    assert not response.replayed


def test_a_rules_only_record_has_no_scores_or_model() -> None:
    """Without scores the response's score map and model fields stay empty."""
    facts = MessageFacts(SourcePosition("online", 0, 1), "m-2", "g-1", "u-1", SENT_AT, "cd" * 32)
    verdict = make_verdict(facts, RuleOutcome(), None, PolicyThresholds(), ModelRun(), queue_ms=0.0)
    response = check_response(Answer(verdict, True, Latency()))
    assert response.decided_by == "pending_model"
    assert not response.scores
    assert response.model_name == ""
    assert response.replayed


def test_harms_reach_the_response_without_a_label() -> None:
    """A verdict from a model with HARMS answers ``scores["harms"]`` with the five
    probabilities as published, and an empty label (they are independent)."""
    from dataclasses import replace

    scores = replace(CALM, harms=(0.125, 0.0, 0.0, 0.0, 0.75))
    facts = MessageFacts(SourcePosition("online", 0, 3), "m-3", "g-1", "u-1", SENT_AT, "ef" * 32)
    verdict = make_verdict(
        facts,
        RuleOutcome(),
        scores,
        PolicyThresholds(),
        ModelRun("moderation", "2", None, 1.0),
        queue_ms=0.0,
    )
    record = verdict_record(verdict, created_at=datetime.now(UTC))
    response = check_response(Answer(verdict, False, Latency()))
    assert dict(response.scores["harms"].probabilities) == record["scores"]["harms"]  # type: ignore[index]
    assert response.scores["harms"].label == ""
    assert response.decision == "flag"
    assert response.category == "sexual"


def test_model_spans_reach_the_response_as_offsets_and_are_unset_without() -> None:
    """An escalated model verdict's words are answered as the record publishes them (output,
    offsets, drops, largest first); a verdict without them leaves the field unset."""
    from dataclasses import replace

    from pipelines.attribution import AttributedSpan, ModelAttribution

    facts = MessageFacts(SourcePosition("online", 0, 4), "m-4", "g-1", "u-1", SENT_AT, "0f" * 32)
    verdict = make_verdict(
        facts, RuleOutcome(), CALM, PolicyThresholds(), ModelRun("moderation", "2"), queue_ms=0.0
    )
    assert not check_response(Answer(verdict, False, Latency())).HasField("model_spans")
    words = ModelAttribution(
        "toxicity.hate", (AttributedSpan(5, 12, 0.5), AttributedSpan(0, 4, 0.25))
    )
    verdict = replace(verdict, model_spans=words)
    response = check_response(Answer(verdict, False, Latency()))
    record = verdict_record(verdict, created_at=datetime.now(UTC))
    assert response.HasField("model_spans")
    assert response.model_spans.output == record["model_spans"]["output"] == "toxicity.hate"  # type: ignore[index]
    answered = [
        {"span": [s.span.start, s.span.end], "drop": s.drop} for s in response.model_spans.spans
    ]
    assert answered == record["model_spans"]["spans"]  # type: ignore[index]
    assert answered[0] == {"span": [5, 12], "drop": 0.5}
