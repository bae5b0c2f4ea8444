"""Tests for pipelines.policy with the model's HARMS output: per-harm thresholds, the category
and reason of each harm, severe escalation, no block for self-harm, and that a model without
HARMS decides as before."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipelines.policy import (
    HARM_CATEGORIES,
    PolicyConfigError,
    PolicyThresholds,
    decide,
    model_flag_pairs,
    standing_flags,
)
from pipelines.policy_file import THRESHOLD_FIELDS, PolicyFileError, parse_policy
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import HARM_LABELS, ModelScores
from pipelines.severe_harm import NEVER_BLOCKED, REVIEW_PRIORITY_FLOOR, is_severe
from pipelines.verdict import DecidedBy, Decision

T = PolicyThresholds()
HARM_THRESHOLDS = {
    "flag_insult": 0.65,
    "block_insult": 0.97,
    "flag_threat": 0.5,
    "flag_self_harm": 0.5,
    "flag_self_harm_incitement": 0.5,
    "flag_sexual_solicitation": 0.65,
}


def _scores(
    *,
    offensive: float = 0.0,
    hate: float = 0.0,
    spam: float = 0.0,
    harms: dict[str, float] | None = None,
    base: float = 0.0,
) -> ModelScores:
    """Scores with the given toxicity and spam; ``harms`` by label over ``base`` for the rest
    (``None``: a model without HARMS)."""
    row = None
    if harms is not None:
        row = tuple(harms.get(label, base) for label in HARM_LABELS)
    return ModelScores(
        sentiment=(0.2, 0.6, 0.2),
        intent=(1.0 - spam, 0.0, spam, 0.0),
        toxicity=(1.0 - offensive - hate, offensive, hate),
        harms=row,
    )


def _decide(scores: ModelScores, outcome: RuleOutcome | None = None) -> object:
    return decide(outcome or RuleOutcome(), scores, T)


# ---------------------------------------------------------------- thresholds


def test_harm_thresholds_have_their_defaults() -> None:
    """Each harm threshold's default, and the worker's policy section carries them."""
    from worker.settings import WorkerSettings

    assert {name: getattr(T, name) for name in HARM_THRESHOLDS} == HARM_THRESHOLDS
    assert WorkerSettings().policy == T


@pytest.mark.parametrize(
    "changes",
    [
        {"flag_insult": 0.98},
        {"flag_insult": 0.6, "block_insult": 0.5},
        {"flag_threat": 1.5},
        {"flag_self_harm": -0.1},
        {"flag_self_harm_incitement": float("nan")},
        {"flag_sexual_solicitation": True},
        {"block_insult": "high"},
    ],
)
def test_invalid_harm_thresholds_are_refused(changes: dict[str, object]) -> None:
    """Outside [0, 1], not a number, or ``flag_insult`` above ``block_insult``:
    ``PolicyConfigError``."""
    with pytest.raises(PolicyConfigError):
        PolicyThresholds(**changes)  # type: ignore[arg-type]


def test_harm_thresholds_are_policy_file_keys() -> None:
    """Every harm threshold is a key of the policy file's ``[thresholds]``, read over the base;
    a file putting the insult flag above its block is refused."""
    assert set(HARM_THRESHOLDS) <= set(THRESHOLD_FIELDS)
    text = "[thresholds]\nflag_threat = 0.3\nblock_insult = 0.9\nflag_sexual_solicitation = 0.7\n"
    got = parse_policy(text, T)
    assert (got.flag_threat, got.block_insult, got.flag_sexual_solicitation) == (0.3, 0.9, 0.7)
    assert got.flag_self_harm == T.flag_self_harm
    with pytest.raises(PolicyFileError, match="flag_insult must not exceed block_insult"):
        parse_policy("[thresholds]\nflag_insult = 0.95\nblock_insult = 0.9\n", T)


def test_harm_thresholds_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MODSTREAM_POLICY__FLAG_<HARM>`` and ``MODSTREAM_POLICY__BLOCK_INSULT`` land in the worker's
    and the online service's policy; an insult flag above its block stops the settings."""
    import pydantic

    from online.settings import OnlineSettings
    from worker.settings import WorkerSettings

    values = {
        "FLAG_INSULT": "0.6",
        "BLOCK_INSULT": "0.9",
        "FLAG_THREAT": "0.4",
        "FLAG_SELF_HARM": "0.3",
        "FLAG_SELF_HARM_INCITEMENT": "0.45",
        "FLAG_SEXUAL_SOLICITATION": "0.7",
    }
    for key, value in values.items():
        monkeypatch.setenv(f"MODSTREAM_POLICY__{key}", value)
    expected = dataclasses.replace(T, **{k.lower(): float(v) for k, v in values.items()})
    assert WorkerSettings().policy == expected
    assert OnlineSettings().policy == expected
    monkeypatch.setenv("MODSTREAM_POLICY__FLAG_INSULT", "0.95")
    with pytest.raises(pydantic.ValidationError, match="flag_insult must not exceed"):
        WorkerSettings()


# ---------------------------------------------------------------- decisions per harm


def test_low_harms_allow() -> None:
    """Every harm below its threshold, nothing else harmful: ALLOW by the model, no escalation."""
    result = decide(RuleOutcome(), _scores(harms={}, base=0.49), T)
    assert result.decision is Decision.ALLOW
    assert result.decided_by is DecidedBy.MODEL
    assert not result.escalate
    assert result.category is None
    assert result.reasons == ()


@pytest.mark.parametrize(
    ("label", "category"),
    [("insult", "offensive"), ("sexual_solicitation", "sexual")],
)
def test_a_non_severe_harm_flags_under_its_category(label: str, category: str) -> None:
    """Insult and sexual solicitation at their flag threshold FLAG under ``offensive`` and
    ``sexual``, with a reason naming the harm, no block. At the default thresholds an insult's
    flag is also in the grey zone (``flag_insult`` = ``escalate_low``), so a person sees it, as
    an offensive flag is; sexual solicitation is not escalated."""
    result = decide(RuleOutcome(), _scores(harms={label: 0.65}), T)
    assert result.decision is Decision.FLAG
    assert result.category == category == HARM_CATEGORIES[label]
    assert result.reasons[0] == f"harms.{label}=0.650>=0.65"
    assert result.escalate == (label == "insult")


def test_an_insult_blocks_at_block_insult() -> None:
    """An insult at ``block_insult`` BLOCKs (category ``offensive``); just below, it flags."""
    blocked = decide(RuleOutcome(), _scores(harms={"insult": 0.97}), T)
    assert blocked.decision is Decision.BLOCK
    assert blocked.category == "offensive"
    assert blocked.reasons == ("harms.insult=0.970>=0.97",)
    below = decide(RuleOutcome(), _scores(harms={"insult": 0.969}), T)
    assert below.decision is Decision.FLAG


@pytest.mark.parametrize("label", ["threat", "self_harm", "self_harm_incitement"])
@pytest.mark.parametrize("value", [0.5, 0.8, 1.0])
def test_a_severe_harm_flags_and_escalates_and_is_never_blocked(label: str, value: float) -> None:
    """Threat, self-harm and incitement at or above their threshold FLAG (even at 1.0: the
    model alone never blocks them), escalate, name their severe category and get at least its
    review priority floor."""
    result = decide(RuleOutcome(), _scores(harms={label: value}), T)
    assert is_severe(HARM_CATEGORIES[label])
    assert result.decision is Decision.FLAG
    assert result.escalate
    assert result.category == label
    assert result.priority >= REVIEW_PRIORITY_FLOOR[label]
    assert result.reasons == (f"harms.{label}={value:.3f}>={0.5:g}",)


@pytest.mark.parametrize("label", ["threat", "self_harm", "self_harm_incitement"])
def test_a_severe_harm_below_its_threshold_neither_flags_nor_escalates(label: str) -> None:
    """Just below its threshold a severe harm does nothing."""
    result = decide(RuleOutcome(), _scores(harms={label: 0.499}), T)
    assert result.decision is Decision.ALLOW
    assert not result.escalate


def test_model_self_harm_caps_a_model_block_at_flag() -> None:
    """A model block (hate, or an insult at its block) with self-harm at its threshold is a
    FLAG, ``never_block:self_harm``, filed under ``self_harm`` at priority 1.0."""
    assert "self_harm" in NEVER_BLOCKED
    for scores in (
        _scores(hate=0.95, harms={"self_harm": 0.6}),
        _scores(harms={"insult": 0.99, "self_harm": 0.6}),
    ):
        result = decide(RuleOutcome(), scores, T)
        assert result.decision is Decision.FLAG
        assert "never_block:self_harm" in result.reasons
        assert result.category == "self_harm"
        assert result.escalate
        assert result.priority == 1.0


def test_a_threat_beside_a_hate_block_blocks_for_hate_and_escalates_as_a_threat() -> None:
    """The model's hate still blocks; the threat beside it escalates the block with the
    threat's priority floor and its reason."""
    result = decide(RuleOutcome(), _scores(hate=0.9, harms={"threat": 0.7}), T)
    assert result.decision is Decision.BLOCK
    assert result.category == "hate"
    assert result.escalate
    assert result.priority >= REVIEW_PRIORITY_FLOOR["threat"]
    assert "harms.threat=0.700>=0.5" in result.reasons


def test_the_most_severe_harm_names_the_category() -> None:
    """Several harms flag: the severe one outranks insult and solicitation, and a self-harm
    among them takes the category (urgent)."""
    result = decide(
        RuleOutcome(), _scores(harms={"insult": 0.8, "sexual_solicitation": 0.9, "threat": 0.6}), T
    )
    assert result.category == "threat"
    assert result.escalate
    urgent = decide(RuleOutcome(), _scores(harms={"threat": 0.9, "self_harm": 0.55}), T)
    assert urgent.category == "self_harm"


def test_harm_reasons_follow_the_rule_reasons() -> None:
    """A flag rule and a harm: the rule reason first, then the model's, as for other model
    reasons."""
    hit = RuleHit("en.x", "offensive", Severity.MEDIUM, RuleAction.FLAG)
    result = decide(RuleOutcome((hit,)), _scores(harms={"sexual_solicitation": 0.7}), T)
    assert result.reasons == ("rule:en.x", "harms.sexual_solicitation=0.700>=0.65")


def test_a_lowered_threshold_moves_the_decision() -> None:
    """Thresholds are read per harm: 0.3 with ``flag_threat`` 0.25 flags and escalates."""
    scores = _scores(harms={"threat": 0.3})
    assert decide(RuleOutcome(), scores, T).decision is Decision.ALLOW
    lowered = decide(RuleOutcome(), scores, dataclasses.replace(T, flag_threat=0.25))
    assert (lowered.decision, lowered.escalate) == (Decision.FLAG, True)


def test_without_a_model_harms_are_not_read() -> None:
    """``model_available=False`` decides from rules alone, whatever the harms say."""
    result = decide(RuleOutcome(), _scores(harms={"threat": 1.0}), T, model_available=False)
    assert result.decided_by is DecidedBy.PENDING_MODEL
    assert result.decision is Decision.ALLOW
    assert not result.escalate


# ---------------------------------------------------------------- grey zone, clearing, pairs


def test_an_insult_in_the_grey_zone_escalates() -> None:
    """An insult in ``[escalate_low, escalate_high)`` above ``toxic`` escalates as the grey
    zone, reason ``grey_zone:harms.insult``."""
    result = decide(RuleOutcome(), _scores(offensive=0.1, harms={"insult": 0.7}), T)
    assert result.decision is Decision.FLAG
    assert result.escalate
    assert result.reasons == ("harms.insult=0.700>=0.65", "grey_zone:harms.insult=0.700")


def test_the_grey_zone_reads_the_larger_of_toxic_and_insult() -> None:
    """``toxic`` in the grey zone but a more certain insult above it: no grey-zone escalation;
    an insult below ``toxic`` leaves the toxicity grey zone as it was."""
    above = decide(RuleOutcome(), _scores(offensive=0.7, harms={"insult": 0.9}), T)
    assert not above.escalate
    below = decide(RuleOutcome(), _scores(offensive=0.7, harms={"insult": 0.2}), T)
    assert below.escalate
    assert below.reasons[-1] == "grey_zone:toxicity=0.700"


def test_the_model_clears_a_yielding_flag_only_when_the_harms_are_low_too() -> None:
    """A ``yields_to_model`` flag is cleared when every probability, harms included, is below
    ``model_clears_below``; an insult at 0.2 keeps it."""
    hit = RuleHit("en.words", "offensive", Severity.MEDIUM, RuleAction.FLAG, True)
    calm = _scores(harms={}, base=0.001)
    assert standing_flags((hit,), calm, T) == ()
    assert decide(RuleOutcome((hit,)), calm, T).decision is Decision.ALLOW
    insulting = _scores(harms={"insult": 0.2}, base=0.001)
    assert standing_flags((hit,), insulting, T) == (hit,)
    assert decide(RuleOutcome((hit,)), insulting, T).decision is Decision.FLAG


def test_model_flag_pairs_name_every_flag_threshold() -> None:
    """Four pairs without HARMS, nine with them, each harm beside its own flag threshold."""
    assert len(model_flag_pairs(_scores(offensive=0.3), T)) == 4
    pairs = model_flag_pairs(
        _scores(harms={"threat": 0.4}), dataclasses.replace(T, flag_threat=0.2)
    )
    assert len(pairs) == 9
    assert pairs[5] == (0.4, 0.2)


_prob = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def _with_harms(draw: st.DrawFn) -> ModelScores:
    def row(n: int) -> tuple[float, ...]:
        weights = [draw(st.floats(min_value=0.01, max_value=1.0)) for _ in range(n)]
        return tuple(w / sum(weights) for w in weights)

    harms = tuple(draw(_prob) for _ in HARM_LABELS)
    return ModelScores(row(3), row(4), row(3), harms)


_hits = st.lists(
    st.builds(
        RuleHit,
        rule_id=st.sampled_from(["a", "b", "c"]),
        category=st.sampled_from(["offensive", "threat", "self_harm", "sexual", "spam"]),
        severity=st.sampled_from(list(Severity)),
        action=st.sampled_from(list(RuleAction)),
        yields_to_model=st.booleans(),
    ),
    max_size=3,
).map(lambda hits: RuleOutcome(tuple(hits)))


@settings(max_examples=300, deadline=None)
@given(scores=_with_harms(), outcome=_hits, harm_flags=st.lists(_prob, min_size=6, max_size=6))
def test_a_model_without_harms_decides_as_if_the_harm_thresholds_did_not_exist(
    scores: ModelScores, outcome: RuleOutcome, harm_flags: list[float]
) -> None:
    """With ``harms=None`` the decision depends on no harm threshold, and equals the decision
    with every harm at 0 (thresholds above 0): harms act only through their values."""
    without = dataclasses.replace(scores, harms=None)
    flag_insult, block_insult = sorted(harm_flags[:2])
    other = dataclasses.replace(
        T,
        flag_insult=flag_insult,
        block_insult=block_insult,
        flag_threat=harm_flags[2],
        flag_self_harm=harm_flags[3],
        flag_self_harm_incitement=harm_flags[4],
        flag_sexual_solicitation=harm_flags[5],
    )
    expected = decide(outcome, without, T)
    assert decide(outcome, without, other) == expected
    zeros = dataclasses.replace(scores, harms=(0.0,) * len(HARM_LABELS))
    assert decide(outcome, zeros, T) == expected


@settings(max_examples=300, deadline=None)
@given(scores=_with_harms(), outcome=_hits)
def test_harm_invariants(scores: ModelScores, outcome: RuleOutcome) -> None:
    """With harms and no decisive rule (a rule block is decided without the model): a harm at
    its flag threshold never ALLOWs; a severe one always escalates with its floor; a model
    self-harm never leaves a BLOCK and files the item under ``self_harm``."""
    assume(not outcome.is_decisive)
    result = decide(outcome, scores, T)
    assert scores.harms is not None
    flagged = {
        label
        for label, value in zip(HARM_LABELS, scores.harms, strict=True)
        if value >= getattr(T, f"flag_{label}")
    }
    if flagged:
        assert result.decision is not Decision.ALLOW
    for label in flagged:
        if is_severe(HARM_CATEGORIES[label]):
            assert result.escalate
            assert result.priority >= REVIEW_PRIORITY_FLOOR[HARM_CATEGORIES[label]]
    if "self_harm" in flagged:
        assert result.decision is not Decision.BLOCK
        assert result.category == "self_harm"


@settings(max_examples=300, deadline=None)
@given(scores=_with_harms(), with_harms=st.booleans())
def test_the_model_flags_exactly_when_a_pair_reaches_its_threshold(
    scores: ModelScores, with_harms: bool
) -> None:
    """Without rule hits the model raises the decision above ALLOW exactly when some
    ``model_flag_pairs`` probability reaches its flag threshold, with harms or without: the
    pairs are what a ranking by how far the model is from flagging must read."""
    if not with_harms:
        scores = dataclasses.replace(scores, harms=None)
    result = decide(RuleOutcome(), scores, T)
    flags = any(value >= threshold for value, threshold in model_flag_pairs(scores, T))
    assert (result.decision is not Decision.ALLOW) == flags
