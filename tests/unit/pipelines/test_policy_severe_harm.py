"""The policy for severe-harm hits: escalation, the never-block rule, categories and priorities."""

from __future__ import annotations

import pytest

from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision

T = PolicyThresholds()

SELF_HARM = RuleHit("en.self_harm.intent", "self_harm", Severity.CRITICAL, RuleAction.FLAG)
INCITEMENT = RuleHit(
    "en.self_harm.incitement", "self_harm_incitement", Severity.HIGH, RuleAction.BLOCK
)
MINORS = RuleHit(
    "en.sexual_exploitation.minors",
    "sexual_exploitation_minors",
    Severity.CRITICAL,
    RuleAction.BLOCK,
)
SEXTORTION = RuleHit(
    "en.sexual_exploitation.sextortion", "sexual_exploitation", Severity.CRITICAL, RuleAction.BLOCK
)
GROOMING = RuleHit(
    "en.sexual_exploitation.grooming", "sexual_exploitation", Severity.HIGH, RuleAction.FLAG
)
THREAT = RuleHit("en.threat.direct", "threat", Severity.CRITICAL, RuleAction.FLAG)
VEILED = RuleHit("en.threat.veiled", "threat", Severity.HIGH, RuleAction.FLAG)
FAMILY = RuleHit("en.threat.family", "threat", Severity.CRITICAL, RuleAction.BLOCK)
PROFANITY = RuleHit("en.offensive.profanity", "offensive", Severity.MEDIUM, RuleAction.FLAG)
SLUR = RuleHit("en.hate.slur", "hate", Severity.CRITICAL, RuleAction.BLOCK)
SPAM_FLAG = RuleHit("zh.spam.easy_money", "spam", Severity.MEDIUM, RuleAction.FLAG)


def _scores(*, offensive: float = 0.0, hate: float = 0.0) -> ModelScores:
    return ModelScores(
        sentiment=(0.8, 0.1, 0.1),
        intent=(1.0, 0.0, 0.0, 0.0),
        toxicity=(1.0 - offensive - hate, offensive, hate),
    )


def _decide(*hits: RuleHit, scores: ModelScores | None = None) -> tuple[Decision, bool, str, float]:
    result = decide(RuleOutcome(hits), scores if scores is not None else _scores(), T)
    return result.decision, result.escalate, result.category or "", result.priority


def test_own_self_harm_flags_and_escalates_at_the_top() -> None:
    """Own self-harm intent: FLAG, escalated, category self_harm, priority 1.0."""
    assert _decide(SELF_HARM) == (Decision.FLAG, True, "self_harm", 1.0)
    without_model = decide(RuleOutcome((SELF_HARM,)), None, T)
    assert (without_model.decision, without_model.escalate) == (Decision.FLAG, True)
    assert without_model.priority == 1.0


def test_self_harm_is_never_blocked_by_the_model() -> None:
    """A toxic-enough message with own self-harm intent is flagged, not blocked, and says why."""
    plain = decide(RuleOutcome((PROFANITY,)), _scores(offensive=0.97), T)
    assert plain.decision is Decision.BLOCK
    result = decide(RuleOutcome((SELF_HARM, PROFANITY)), _scores(offensive=0.97), T)
    assert result.decision is Decision.FLAG
    assert result.escalate
    assert result.category == "self_harm"
    assert result.priority == 1.0
    assert "never_block:self_harm" in result.reasons


def test_a_block_rule_of_another_category_still_blocks_self_harm() -> None:
    """A slur next to self-harm intent is blocked by rules, filed under self_harm at the top."""
    result = decide(RuleOutcome((SLUR, SELF_HARM)), None, T)
    assert result.decision is Decision.BLOCK
    assert result.decided_by is DecidedBy.RULES
    assert (result.escalate, result.category, result.priority) == (True, "self_harm", 1.0)


def test_incitement_blocks_and_escalates() -> None:
    """Telling someone to kill themselves is blocked by rules and escalated (floor 0.8)."""
    result = decide(RuleOutcome((INCITEMENT,)), None, T)
    assert (result.decision, result.decided_by) == (Decision.BLOCK, DecidedBy.RULES)
    assert (result.escalate, result.category) == (True, "self_harm_incitement")
    assert result.priority >= 0.8


def test_minors_block_with_top_priority() -> None:
    """Anything involving minors: BLOCK by rules, escalated, top priority, its own category."""
    result = decide(RuleOutcome((MINORS, GROOMING)), None, T)
    assert (result.decision, result.escalate) == (Decision.BLOCK, True)
    assert (result.category, result.priority) == ("sexual_exploitation_minors", 1.0)


def test_sextortion_blocks_and_grooming_flags() -> None:
    """Sextortion blocks; a grooming cue flags; both escalate in sexual_exploitation."""
    block = decide(RuleOutcome((SEXTORTION,)), None, T)
    assert (block.decision, block.escalate, block.category) == (
        Decision.BLOCK,
        True,
        "sexual_exploitation",
    )
    decision, escalate, category, priority = _decide(GROOMING)
    assert (decision, escalate, category) == (Decision.FLAG, True, "sexual_exploitation")
    assert priority == pytest.approx(0.85)


def test_threats_flag_or_block_and_escalate() -> None:
    """Direct and veiled threats flag and escalate (floor 0.85); threats to a family block."""
    assert _decide(THREAT)[:3] == (Decision.FLAG, True, "threat")
    decision, escalate, category, priority = _decide(VEILED)
    assert (decision, escalate, category) == (Decision.FLAG, True, "threat")
    assert priority == pytest.approx(0.85)
    family = decide(RuleOutcome((FAMILY,)), None, T)
    assert (family.decision, family.escalate, family.category) == (Decision.BLOCK, True, "threat")


def test_threat_outranks_a_weaker_flag_for_the_category() -> None:
    """A threat next to profanity and a model offensive flag is filed as a threat."""
    assert _decide(VEILED, PROFANITY, scores=_scores(offensive=0.7))[2] == "threat"


def test_other_categories_keep_their_priority() -> None:
    """A plain flag hit outside the severe categories is neither escalated nor given a floor."""
    decision, escalate, category, priority = _decide(SPAM_FLAG)
    assert (decision, escalate, category) == (Decision.FLAG, False, "spam")
    assert priority == pytest.approx(0.6 * 0.5)


def test_priority_order_of_severe_categories() -> None:
    """Self-harm and minors outrank threats and incitement, which outrank a plain hate flag."""
    own = decide(RuleOutcome((SELF_HARM,)), _scores(), T).priority
    minors = decide(RuleOutcome((MINORS,)), None, T).priority
    threat = decide(RuleOutcome((VEILED,)), _scores(), T).priority
    incite = decide(RuleOutcome((INCITEMENT,)), _scores(), T).priority
    hate_flag = decide(RuleOutcome(), _scores(hate=0.6), T).priority
    assert own == minors == 1.0
    assert own > threat >= incite > hate_flag
