"""Tests for pipelines.policy: thresholds, the three decision paths, and their invariants."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipelines.policy import PolicyConfigError, PolicyThresholds, decide, standing_flags
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.severe_harm import REVIEW_PRIORITY_FLOOR, is_severe
from pipelines.verdict import DecidedBy, Decision

T = PolicyThresholds()
LEVEL = {Decision.ALLOW: 0, Decision.FLAG: 1, Decision.BLOCK: 2}


def _scores(
    *, offensive: float = 0.0, hate: float = 0.0, spam: float = 0.0, ad: float = 0.0
) -> ModelScores:
    return ModelScores(
        sentiment=(0.2, 0.6, 0.2),
        intent=(1.0 - spam - ad, 0.0, spam, ad),
        toxicity=(1.0 - offensive - hate, offensive, hate),
    )


def _hit(
    rule_id: str,
    action: RuleAction = RuleAction.FLAG,
    severity: Severity = Severity.MEDIUM,
    category: str = "offensive",
    *,
    yields_to_model: bool = False,
) -> RuleHit:
    return RuleHit(
        rule_id=rule_id,
        category=category,
        severity=severity,
        action=action,
        yields_to_model=yields_to_model,
    )


def test_thresholds_are_the_settings_defaults() -> None:
    """The worker's policy section defaults to these thresholds."""
    from worker.settings import WorkerSettings

    assert WorkerSettings().policy == T


@pytest.mark.parametrize(
    "changes",
    [
        {"block_hate": 1.5},
        {"flag_spam": -0.1},
        {"flag_hate": float("nan")},
        {"escalate_low": 0.9, "escalate_high": 0.5},
        {"escalate_low": 0.5, "escalate_high": 0.5},
        {"flag_hate": 0.9, "block_hate": 0.8},
        {"flag_offensive": 0.99},
        {"flag_spam": 0.99},
        {"block_hate": True},
    ],
)
def test_invalid_thresholds_rejected(changes: dict[str, float]) -> None:
    """Values outside [0, 1], low >= high, or a flag above its block raise PolicyConfigError."""
    with pytest.raises(PolicyConfigError):
        PolicyThresholds(**changes)


def test_decisive_rule_blocks_without_model() -> None:
    """A block hit decides BLOCK by rules even when the model says harmless."""
    outcome = RuleOutcome((_hit("spam.x", RuleAction.BLOCK, Severity.HIGH, "spam"),))
    result = decide(outcome, _scores(), T)
    assert result.decision is Decision.BLOCK
    assert result.decided_by is DecidedBy.RULES
    assert result.category == "spam"
    assert not result.escalate
    assert result.reasons == ("rule:spam.x",)
    assert result.priority == pytest.approx(0.6 * 0.75 + 0.4)


def test_decisive_critical_rule_escalates() -> None:
    """A critical block hit blocks and escalates, with top priority."""
    outcome = RuleOutcome((_hit("en.hate.slur", RuleAction.BLOCK, Severity.CRITICAL, "hate"),))
    result = decide(outcome, None, T, model_available=False)
    assert result.decision is Decision.BLOCK
    assert result.decided_by is DecidedBy.RULES
    assert result.escalate
    assert result.category == "hate"
    assert result.priority == 1.0


def test_decisive_with_escalate_hit_escalates() -> None:
    """A block hit plus an escalate hit escalates; reasons list both, most severe first."""
    outcome = RuleOutcome(
        (
            _hit("flagged", RuleAction.FLAG, Severity.LOW),
            _hit("esc", RuleAction.ESCALATE, Severity.HIGH, "threat"),
            _hit("blk", RuleAction.BLOCK, Severity.MEDIUM, "spam"),
        )
    )
    result = decide(outcome, None, T)
    assert result.escalate
    assert result.category == "spam"
    assert result.reasons == ("rule:esc", "rule:blk", "rule:flagged")


def test_no_model_allow_without_hits() -> None:
    """Without scores and without hits: ALLOW, pending_model."""
    result = decide(RuleOutcome(), None, T)
    assert result.decision is Decision.ALLOW
    assert result.decided_by is DecidedBy.PENDING_MODEL
    assert not result.escalate
    assert result.category is None
    assert result.reasons == ("model:pending",)


def test_no_model_flag_hit_flags() -> None:
    """Without scores a flag hit gives FLAG, pending_model."""
    result = decide(RuleOutcome((_hit("f"),)), None, T)
    assert result.decision is Decision.FLAG
    assert result.decided_by is DecidedBy.PENDING_MODEL
    assert result.category == "offensive"
    assert result.reasons == ("rule:f", "model:pending")


def test_no_model_escalate_hit_escalates_but_allows() -> None:
    """Without scores an escalate hit escalates; the decision stays ALLOW (a human decides)."""
    hit = _hit("abuse", RuleAction.ESCALATE, Severity.CRITICAL, "harassment")
    result = decide(RuleOutcome((hit,)), None, T)
    assert result.decision is Decision.ALLOW
    assert result.escalate
    assert result.category == "harassment"
    assert result.priority == pytest.approx(0.6 * 1.0 + 0.4 * 0.5)


def test_model_unavailable_ignores_scores() -> None:
    """model_available=False decides from rules even if scores are passed."""
    result = decide(RuleOutcome(), _scores(hate=0.99), T, model_available=False)
    assert result.decided_by is DecidedBy.PENDING_MODEL
    assert result.decision is Decision.ALLOW


@pytest.mark.parametrize(
    ("scores", "decision", "category", "reason"),
    [
        (_scores(hate=0.91), Decision.BLOCK, "hate", "toxicity.hate=0.910>=0.85"),
        (_scores(hate=0.7, offensive=0.2), Decision.FLAG, "hate", "toxicity.hate=0.700>=0.65"),
        (_scores(offensive=0.96), Decision.BLOCK, "offensive", "toxicity.offensive_or_hate"),
        (_scores(offensive=0.7), Decision.FLAG, "offensive", "toxicity.offensive_or_hate=0.700"),
        (_scores(spam=0.98), Decision.BLOCK, "spam", "intent.spam=0.980>=0.97"),
        (_scores(spam=0.75), Decision.FLAG, "spam", "intent.spam=0.750>=0.65"),
        (_scores(spam=0.66), Decision.FLAG, "spam", "intent.spam=0.660>=0.65"),
        (_scores(spam=0.6), Decision.ALLOW, None, None),
        (_scores(ad=0.8), Decision.FLAG, "advertisement", "intent.advertisement=0.800>=0.65"),
        (_scores(offensive=0.1, spam=0.2), Decision.ALLOW, None, None),
    ],
)
def test_model_thresholds(
    scores: ModelScores, decision: Decision, category: str | None, reason: str | None
) -> None:
    """Each model threshold yields its decision, category and a reason naming the score."""
    result = decide(RuleOutcome(), scores, T)
    assert result.decided_by is DecidedBy.MODEL
    assert result.decision is decision
    assert result.category == category
    if reason is None:
        assert result.reasons == ()
    else:
        assert any(r.startswith(reason) for r in result.reasons), result.reasons


def test_offensive_threshold_counts_hate_too() -> None:
    """1 - P(none) drives the offensive thresholds (offensive 0.5 + hate 0.46 blocks at 0.95)."""
    result = decide(RuleOutcome(), _scores(offensive=0.5, hate=0.46), T)
    assert result.decision is Decision.BLOCK
    assert result.category == "offensive"


def test_hate_outranks_offensive_for_category() -> None:
    """When hate and offensive both block, the category is hate."""
    result = decide(RuleOutcome(), _scores(offensive=0.1, hate=0.9), T)
    assert result.decision is Decision.BLOCK
    assert result.category == "hate"
    assert result.escalate  # severe hate
    assert any(r.startswith("severe:toxicity.hate=") for r in result.reasons)


def test_grey_zone_escalates() -> None:
    """Toxicity in [escalate_low, escalate_high) escalates even when allowed (a grey zone that
    starts below the flag threshold)."""
    wide = PolicyThresholds(escalate_low=0.45)
    result = decide(RuleOutcome(), _scores(offensive=0.5), wide)
    assert result.decision is Decision.ALLOW
    assert result.escalate
    assert result.category == "offensive"
    assert "grey_zone:toxicity=0.500" in result.reasons


def test_default_grey_zone_starts_at_the_flag_threshold() -> None:
    """By default what the model allows is not escalated; what it flags is, up to the block."""
    assert T.escalate_low == T.flag_offensive
    allowed = decide(RuleOutcome(), _scores(offensive=0.55), T)
    assert (allowed.decision, allowed.escalate) == (Decision.ALLOW, False)
    flagged = decide(RuleOutcome(), _scores(offensive=0.7), T)
    assert (flagged.decision, flagged.escalate) == (Decision.FLAG, True)


def test_below_grey_zone_does_not_escalate() -> None:
    """Toxicity below escalate_low neither flags nor escalates."""
    result = decide(RuleOutcome(), _scores(offensive=0.44), T)
    assert result.decision is Decision.ALLOW
    assert not result.escalate
    assert result.category is None


def test_clear_offensive_block_is_not_grey() -> None:
    """Offensive at 0.96 blocks and is above the grey zone: no escalation."""
    result = decide(RuleOutcome(), _scores(offensive=0.96), T)
    assert result.decision is Decision.BLOCK
    assert not result.escalate


def test_flag_rule_raises_allow_to_flag() -> None:
    """A flag rule hit flags a message the model finds harmless; the rule is the category."""
    hit = _hit("zh.ad", RuleAction.FLAG, Severity.MEDIUM, "advertisement")
    result = decide(RuleOutcome((hit,)), _scores(), T)
    assert result.decision is Decision.FLAG
    assert result.decided_by is DecidedBy.MODEL
    assert result.category == "advertisement"
    assert result.reasons == ("rule:zh.ad",)


def test_escalate_rule_with_model_escalates() -> None:
    """An escalate hit escalates under the model path, without raising the decision."""
    hit = _hit("strikes", RuleAction.ESCALATE, Severity.HIGH, "repeat_offender")
    result = decide(RuleOutcome((hit,)), _scores(), T)
    assert result.decision is Decision.ALLOW
    assert result.escalate
    assert result.category == "repeat_offender"
    assert result.priority == pytest.approx(0.6 * 0.75 + 0.4 * 0.0)


def test_model_block_outranks_rule_flag_category() -> None:
    """When the model blocks for hate, a low rule flag does not become the category."""
    hit = _hit("ad", RuleAction.FLAG, Severity.LOW, "advertisement")
    result = decide(RuleOutcome((hit,)), _scores(hate=0.9), T)
    assert result.decision is Decision.BLOCK
    assert result.category == "hate"
    assert result.reasons[0] == "rule:ad"


def test_priority_formula_for_model_decisions() -> None:
    """priority = 0.6 * severity weight + 0.4 * confidence (hate block, severe: 1.0 weight)."""
    result = decide(RuleOutcome(), _scores(hate=0.9), T)
    assert result.priority == pytest.approx(0.6 * 1.0 + 0.4 * 0.9)
    grey = decide(RuleOutcome(), _scores(offensive=0.5), PolicyThresholds(escalate_low=0.45))
    assert grey.priority == pytest.approx(0.6 * 0.5 + 0.4 * 0.5)


# ---------------------------------------------------------------- properties

_prob = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def _score_sets(draw: st.DrawFn) -> ModelScores:
    def row(n: int) -> tuple[float, ...]:
        weights = [draw(st.floats(min_value=0.0, max_value=1.0)) for _ in range(n)]
        total = sum(weights)
        assume(total > 1e-6)
        return tuple(w / total for w in weights)

    return ModelScores(sentiment=row(3), intent=row(4), toxicity=row(3))


_hits = st.builds(
    RuleHit,
    rule_id=st.sampled_from(["a", "b", "c", "d"]),
    category=st.sampled_from(
        ["hate", "spam", "threat", "self_harm", "sexual_exploitation_minors", "repeat_offender"]
    ),
    severity=st.sampled_from(list(Severity)),
    action=st.sampled_from(list(RuleAction)),
    yields_to_model=st.booleans(),
)
_outcomes = st.lists(_hits, max_size=4).map(lambda hits: RuleOutcome(tuple(hits)))


@st.composite
def _thresholds(draw: st.DrawFn) -> PolicyThresholds:
    def pair() -> tuple[float, float]:
        low, high = sorted((draw(_prob), draw(_prob)))
        return low, high

    flag_hate, block_hate = pair()
    flag_off, block_off = pair()
    flag_spam, block_spam = pair()
    low, high = pair()
    assume(low < high)
    return PolicyThresholds(
        block_hate=block_hate,
        block_offensive=block_off,
        flag_offensive=flag_off,
        flag_hate=flag_hate,
        block_spam=block_spam,
        flag_spam=flag_spam,
        flag_advertisement=draw(_prob),
        escalate_low=low,
        escalate_high=high,
        model_clears_below=draw(_prob),
    )


@settings(max_examples=400, deadline=None)
@given(
    _outcomes,
    st.one_of(st.none(), _score_sets()),
    _thresholds(),
    st.booleans(),
)
def test_result_invariants(
    outcome: RuleOutcome, scores: ModelScores | None, t: PolicyThresholds, available: bool
) -> None:
    """Priority in [0, 1]; decisive rules always block by rules; escalate rules always escalate."""
    result = decide(outcome, scores, t, model_available=available)
    assert 0.0 <= result.priority <= 1.0
    if outcome.is_decisive:
        assert result.decision is Decision.BLOCK
        assert result.decided_by is DecidedBy.RULES
    elif scores is None or not available:
        assert result.decided_by is DecidedBy.PENDING_MODEL
    else:
        assert result.decided_by is DecidedBy.MODEL
    if outcome.wants_escalation:
        assert result.escalate
    model = scores if available else None
    if standing_flags(outcome.hits, model, t):  # a flag rule the model does not clear
        assert result.decision is not Decision.ALLOW
    if result.decision is Decision.ALLOW and not result.escalate:
        assert result.category is None
    else:
        assert result.category is not None
    assert all(f"rule:{hit.rule_id}" in result.reasons for hit in outcome.hits)
    floors = [REVIEW_PRIORITY_FLOOR[h.category] for h in outcome.hits if is_severe(h.category)]
    if floors:
        assert result.escalate
        assert result.priority >= max(floors)
    if any(hit.category == "self_harm" for hit in outcome.hits):
        assert result.category == "self_harm"
        if not outcome.is_decisive:
            assert result.decision is not Decision.BLOCK


@settings(max_examples=400, deadline=None)
@given(
    _outcomes,
    _score_sets(),
    _thresholds(),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_decision_monotone_in_hate(
    outcome: RuleOutcome,
    scores: ModelScores,
    t: PolicyThresholds,
    from_none: float,
    from_offensive: float,
) -> None:
    """Moving probability mass to hate (from none or from offensive) never lowers the decision."""
    none, offensive, hate = scores.toxicity
    take_none = none * from_none
    take_offensive = offensive * from_offensive
    # min(): the three parts can add up to 1 + 2e-16, which ModelScores rightly refuses
    raised_hate = min(1.0, hate + take_none + take_offensive)
    raised_tox = (none - take_none, offensive - take_offensive, raised_hate)
    assume(abs(sum(raised_tox) - 1.0) < 1e-6)
    raised = dataclasses.replace(scores, toxicity=raised_tox)
    before = decide(outcome, scores, t)
    after = decide(outcome, raised, t)
    assert LEVEL[after.decision] >= LEVEL[before.decision]


_WORDS = _hit("en.words", yields_to_model=True)


@pytest.mark.parametrize(
    ("scores", "cleared"),
    [
        (_scores(offensive=0.004), True),
        (_scores(offensive=0.002, hate=0.002, spam=0.003, ad=0.002), True),
        (_scores(offensive=0.012), False),
        (_scores(hate=0.011), False),
        (_scores(spam=0.02), False),
        (_scores(ad=0.01), False),
    ],
)
def test_the_model_clears_a_yielding_flag_only_when_every_harm_probability_is_low(
    scores: ModelScores, cleared: bool
) -> None:
    """A ``yields_to_model`` flag is dropped when toxic, spam and advertisement are all below
    ``model_clears_below`` (0.01); the hit stays in the reasons with ``cleared_by_model``."""
    result = decide(RuleOutcome((_WORDS,)), scores, T)
    assert result.decision is (Decision.ALLOW if cleared else Decision.FLAG)
    assert ("cleared_by_model:en.words" in result.reasons) is cleared
    assert "rule:en.words" in result.reasons


def test_clearing_leaves_other_flags_and_needs_a_model() -> None:
    """Only the yielding rule's flag is dropped; without scores, or with clearing turned off
    (0), the flag stands."""
    low = _scores(offensive=0.001)
    other = _hit("en.other")
    both = decide(RuleOutcome((_WORDS, other)), low, T)
    assert both.decision is Decision.FLAG
    assert "cleared_by_model:en.words" in both.reasons
    assert "cleared_by_model:en.other" not in both.reasons
    pending = decide(RuleOutcome((_WORDS,)), None, T, model_available=False)
    assert pending.decision is Decision.FLAG
    off = dataclasses.replace(T, model_clears_below=0.0)
    assert decide(RuleOutcome((_WORDS,)), low, off).decision is Decision.FLAG
    assert decide(RuleOutcome((_hit("en.plain"),)), low, T).decision is Decision.FLAG
