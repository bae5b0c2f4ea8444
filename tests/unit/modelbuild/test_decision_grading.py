"""Whole-decision grading: the worker's path with a fake scorer, the rates, the report lines."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from common.settings import project_root
from modelbuild.decision_grading import HEADLINE_KEYS, format_grading, grade, is_caught
from modelbuild.devset import DevExample
from modelbuild.evaluate import HEADLINE_KEYS as EVAL_KEYS
from modelbuild.evaluate import grade_devset, headline_line
from modelbuild.whole_decision import (
    FLAG_SCORE,
    RULE_SCORE,
    decide_and_score,
    decide_texts,
    harm_score,
    served_config,
)
from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.rules import RuleEngine, parse_ruleset
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Decision, PolicyResult

CALM = ModelScores((0.1, 0.8, 0.1), (0.9, 0.1, 0.0, 0.0), (0.98, 0.01, 0.01))
HATEFUL = ModelScores((0.9, 0.1, 0.0), (0.9, 0.1, 0.0, 0.0), (0.02, 0.08, 0.9))


class FakeScorer:
    """Hateful scores for texts containing "zorg", calm ones otherwise; remembers its inputs."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[ModelScores]:
        self.seen.extend(texts)
        return [HATEFUL if "zorg" in t else CALM for t in texts]


def _result(decision: Decision, escalate: bool = False) -> PolicyResult:
    return PolicyResult(decision, DecidedBy.MODEL, escalate, None, 0.0)


def _ex(lang: str, form: str, transform: str = "none", category: str = "hate") -> DevExample:
    label = "benign" if form == "benign_hard" else "harmful"
    topic = "animal" if label == "benign" else ""
    return DevExample("t", lang, label, category, form, transform, "hand_written", topic)


def test_rule_blocks_skip_the_model_and_the_rest_are_scored() -> None:
    """A slur is blocked by rules without a model call; other texts are decided on the scores."""
    scorer = FakeScorer()
    results = decide_texts(["you faggot", "zorg zorg", "nice weather today"], scorer)
    assert scorer.seen == ["zorg zorg", "nice weather today"]
    blocked, hateful, calm = results
    assert blocked is not None
    assert blocked.decided_by is DecidedBy.RULES
    assert blocked.decision is Decision.BLOCK
    assert hateful is not None
    assert hateful.decision is Decision.BLOCK
    assert hateful.decided_by is DecidedBy.MODEL
    assert calm is not None
    assert calm.decision is Decision.ALLOW


def test_the_scorer_receives_the_canonical_text() -> None:
    """The model is sent ``canonicalize(text).text`` (case folded, full-width and Traditional
    forms undone), as the worker sends it, not the raw message."""
    scorer = FakeScorer()
    decide_texts(["ＮＩＣＥ Weather  TODAY", "今天天氣很好"], scorer)
    assert scorer.seen == ["nice weather today", "今天天气很好"]


_ESCALATE_ONLY = """
[[rules]]
id = "t.escalate"
category = "harassment"
severity = "medium"
action = "escalate"
kind = "keywords"
languages = ["en"]
keywords = ["meet me outside"]
"""


def test_an_escalating_rule_alone_is_not_a_catch() -> None:
    """A rule that only escalates, with calm scores, leaves the decision allow: not caught."""
    engine = RuleEngine(parse_ruleset(_ESCALATE_ONLY))
    (result,) = decide_texts(["meet me outside after class"], FakeScorer(), engine=engine)
    assert result is not None
    assert result.escalate
    assert result.decision is Decision.ALLOW
    assert not is_caught(result)


def test_undecodable_text_gets_no_decision() -> None:
    """Text that is only zero-width characters is dead-lettered by the decoder: no decision."""
    scorer = FakeScorer()
    assert decide_texts(["\u200b\u200b"], scorer) == [None]
    assert scorer.seen == []


def test_rates_are_computed_per_group() -> None:
    """Hand-counted: 2 of 4 plain caught (escalation and dead letter are misses), 1 of 2
    disguised, 2 of 3 benign lines flagged or escalated."""
    examples = [
        _ex("en", "plain"),
        _ex("en", "plain"),
        _ex("en", "plain"),
        _ex("en", "plain"),
        _ex("en", "disguised", "leet"),
        _ex("en", "disguised", "mask", category="spam"),
        _ex("en", "benign_hard"),
        _ex("en", "benign_hard"),
        _ex("en", "benign_hard"),
    ]
    results = [
        _result(Decision.BLOCK),
        _result(Decision.FLAG),
        _result(Decision.ALLOW, escalate=True),
        None,
        _result(Decision.ALLOW),
        _result(Decision.FLAG),
        _result(Decision.ALLOW),
        _result(Decision.ALLOW, escalate=True),
        _result(Decision.FLAG),
    ]
    report = grade(examples, results)
    en = report["by_lang"]["en"]
    assert en["plain"] == {"n": 4, "catch": 0.5, "blocked_by_rules": 0.0, "escalated_only": 0.25}
    assert en["disguised"]["catch"] == 0.5
    assert en["benign"] == {"n": 3, "fpr": 0.6667}
    assert report["by_transform"]["en"]["leet"]["catch"] == 0.0
    assert report["by_transform"]["en"]["mask"]["catch"] == 1.0
    assert report["by_category"]["en"]["spam"]["disguised"]["n"] == 1
    assert report["by_lang"]["zh"]["plain"] == {"n": 0, "catch": 0.0} | {
        "blocked_by_rules": 0.0,
        "escalated_only": 0.0,
    }
    assert tuple(report["headline"]) == HEADLINE_KEYS
    assert report["headline"]["plain_catch_en"] == 0.5
    assert report["headline"]["benign_fpr_en"] == 0.6667
    assert report["decisions"][3]["decision"] == "dead_letter"


def test_mismatched_lengths_are_refused() -> None:
    """One decision per line, or ValueError."""
    with pytest.raises(ValueError, match="decisions"):
        grade([_ex("en", "plain")], [])


def test_printed_lines_put_the_weakest_transform_first() -> None:
    """Within a language the transform with the lowest catch rate is printed first."""
    examples = [_ex("en", "disguised", "leet"), _ex("en", "disguised", "mask")]
    report = grade(examples, [_result(Decision.FLAG), _result(Decision.ALLOW)])
    lines = [line for line in format_grading(report) if " transform " in line]
    assert "mask" in lines[0]
    assert "leet" in lines[1]


def test_headline_line_format() -> None:
    """The eval's last line: the seventeen keys in the documented order (the real-text ones
    last), four decimals each."""
    values = dict(zip(EVAL_KEYS, [i / 7 for i in range(len(EVAL_KEYS))], strict=True))
    line = headline_line(values)
    assert line.split(" ")[0] == "sentiment_macro_f1_en=0.0000"
    assert line.split(" ")[4] == "disguised_catch_en=0.5714"
    assert [part.split("=")[0] for part in line.split(" ")] == [
        "sentiment_macro_f1_en",
        "sentiment_acc_zh",
        "toxicity_fpr_chat",
        "intent_spam_fpr_chat",
        "disguised_catch_en",
        "disguised_catch_zh",
        "plain_catch_en",
        "plain_catch_zh",
        "benign_fpr_en",
        "benign_fpr_zh",
        "f1_en",
        "f1_zh",
        "realtext_flag_en",
        "realtext_flag_zh",
        "realtext_block_en",
        "realtext_block_zh",
        "insult_cv_auc",
    ]
    with pytest.raises(ValueError, match="headline keys"):
        headline_line(dict(reversed(values.items())))


def test_grade_devset_runs_the_committed_set_with_a_fake_scorer() -> None:
    """The committed dev set goes through rules and the fake scorer; the headline has six rates
    in [0, 1] and the rule-blocked lines never reach the scorer."""
    scorer = FakeScorer()
    report = grade_devset(scorer)
    assert tuple(report["headline"]) == HEADLINE_KEYS
    assert all(0.0 <= v <= 1.0 for v in report["headline"].values())
    ruled = [d["text"] for d in report["decisions"] if d["decided_by"] == "rules"]
    assert ruled
    assert not set(ruled) & set(scorer.seen)


def test_served_config_reads_the_moderation_model() -> None:
    """The in-process scorer is configured with the served model's outputs and head files."""
    args = served_config(project_root() / "model_repository")
    config = json.loads(args["model_config"])
    assert [o["name"] for o in config["output"]] == ["SENTIMENT", "INTENT", "TOXICITY", "HARMS"]
    assert config["parameters"]["toxicity_file"]["string_value"] == "heads/toxicity.onnx"
    previous = json.loads(
        served_config(project_root() / "model_repository", "moderation_v2")["model_config"]
    )
    assert previous["parameters"]["toxicity_file"]["string_value"] == "../toxicity/3/model.onnx"


def test_if_plain_caught_counts_only_disguises_of_caught_seeds() -> None:
    """Seed a is caught, seed b is not: a's disguises (1 of 2 caught) give if_plain_caught 0.5,
    while b's caught disguise still counts in the overall disguised catch (2 of 3)."""

    def line(text: str, form: str, seed: str = "") -> DevExample:
        transform = "leet" if form == "disguised" else "none"
        source = "generated" if seed else "hand_written"
        return DevExample(text, "zh", "harmful", "hate", form, transform, source, "", seed)

    examples = [
        line("a", "plain"),
        line("a1", "disguised", "a"),
        line("a2", "disguised", "a"),
        line("b", "plain"),
        line("b1", "disguised", "b"),
    ]
    results = [
        _result(Decision.BLOCK),
        _result(Decision.FLAG),
        _result(Decision.ALLOW),
        _result(Decision.ALLOW),
        _result(Decision.FLAG),
    ]
    disguised = grade(examples, results)["by_lang"]["zh"]["disguised"]
    assert disguised["catch"] == 0.6667
    assert disguised["n_plain_caught"] == 2
    assert disguised["if_plain_caught"] == 0.5
    leet = grade(examples, results)["by_transform"]["zh"]["leet"]
    assert leet["if_plain_caught"] == 0.5


def test_detection_metrics_per_language_and_category() -> None:
    """Hand-counted on four English lines: hate caught and missed, one benign hate line flagged,
    one benign spam line allowed; the category rows pair a category's harmful lines with the
    benign lines written for it (all benign lines when it has none), the all row takes every
    line."""
    examples = [
        _ex("en", "plain"),
        _ex("en", "plain"),
        _ex("en", "benign_hard"),
        _ex("en", "benign_hard", category="spam"),
    ]
    results = [
        _result(Decision.FLAG),
        _result(Decision.ALLOW),
        _result(Decision.FLAG),
        _result(Decision.ALLOW),
    ]
    report = grade(examples, results, [1.0, 0.3, 0.6, 0.1])
    everything = report["detection"]["en"]["all"]
    assert everything["precision"] == 0.5
    assert everything["recall"] == 0.5
    assert everything["fpr"] == 0.5
    assert everything["auprc"] == 0.8333
    assert report["detection"]["en"]["hate"]["fpr"] == 1.0
    assert "spam" not in report["detection"]["en"]
    threat = grade([*examples, _ex("en", "plain", category="threat")], [*results, results[0]])
    assert threat["detection"]["en"]["threat"]["n_benign"] == 2  # none of its own: all benign
    assert report["headline"]["f1_en"] == 0.5
    assert any(" detection hate " in line for line in format_grading(report))


@pytest.mark.parametrize(
    ("toxicity", "intent"),
    [
        ((0.9, 0.08, 0.02), (0.9, 0.1, 0.0, 0.0)),
        ((0.3, 0.6, 0.1), (0.9, 0.1, 0.0, 0.0)),
        ((0.5, 0.1, 0.4), (0.9, 0.1, 0.0, 0.0)),
        ((0.95, 0.03, 0.02), (0.2, 0.0, 0.75, 0.05)),
        ((0.95, 0.03, 0.02), (0.3, 0.0, 0.05, 0.65)),
        ((0.35, 0.6, 0.05), (0.9, 0.1, 0.0, 0.0)),
    ],
)
def test_harm_score_is_at_least_one_exactly_when_the_model_flags(
    toxicity: tuple[float, float, float], intent: tuple[float, float, float, float]
) -> None:
    """Without rule hits, the default thresholds flag or block a message exactly when its harm
    score reaches 0.5, so thresholding the score there is the decision (the AUPRC's ranking)."""
    scores = ModelScores((0.3, 0.4, 0.3), intent, toxicity)
    thresholds = PolicyThresholds()
    caught = is_caught(decide(RuleOutcome(), scores, thresholds))
    assert caught == (harm_score(RuleOutcome(), scores, thresholds) >= FLAG_SCORE)


def test_a_flag_or_block_rule_scores_above_every_model_score() -> None:
    """A rule flag or block ranks above any model probability; an escalate-only hit does not."""
    flag = RuleHit("r", "hate", Severity.HIGH, RuleAction.FLAG)
    escalate = RuleHit("e", "threat", Severity.HIGH, RuleAction.ESCALATE)
    thresholds = PolicyThresholds()
    assert harm_score(RuleOutcome((flag,)), CALM, thresholds) == RULE_SCORE
    assert harm_score(RuleOutcome((escalate,)), CALM, thresholds) < FLAG_SCORE
    assert harm_score(RuleOutcome(), HATEFUL, thresholds) < RULE_SCORE
    decided = decide_and_score(["you faggot", "nice weather today"], FakeScorer())
    assert decided[0].score == RULE_SCORE
    assert decided[1].score < FLAG_SCORE
