"""The attribute mapping: the shipped table loads, scores combine model and rules as documented."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from online.perspective.mapping import (
    ATTRIBUTES_FILE,
    MappingError,
    Unscorable,
    load_mapping,
    parse_mapping,
)
from pipelines.rule_hits import RuleAction, RuleHit, Severity
from pipelines.rules import default_ruleset
from pipelines.scores import ModelScores

PERSPECTIVE = {
    "TOXICITY",
    "SEVERE_TOXICITY",
    "IDENTITY_ATTACK",
    "INSULT",
    "PROFANITY",
    "THREAT",
    "SEXUALLY_EXPLICIT",
}
MAPPING = load_mapping()
HARMFUL = ModelScores(
    sentiment=(0.8, 0.1, 0.1),
    intent=(1.0, 0.0, 0.0, 0.0),
    toxicity=(0.2, 0.5, 0.3),
    harms=(0.7, 0.05, 0.0, 0.0, 0.4),
)
NO_HARMS = ModelScores(
    sentiment=(0.8, 0.1, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(0.2, 0.5, 0.3)
)


def _hit(category: str, severity: Severity, rule_id: str = "x.rule") -> RuleHit:
    return RuleHit(rule_id, category, severity, RuleAction.FLAG, spans=((3, 7),))


def test_the_shipped_table_scores_perspectives_seven_attributes_in_english_and_chinese() -> None:
    assert set(MAPPING.attributes) == PERSPECTIVE
    assert all(rule.languages == {"en", "zh"} for rule in MAPPING.attributes.values())


def test_every_rule_id_and_category_named_exists_in_the_default_rule_set() -> None:
    """A renamed rule would silently stop counting: the table names only real rules."""
    rules = default_ruleset().rules
    ids = {rule.meta.id for rule in rules}
    categories = {rule.meta.category for rule in rules}
    for attribute in MAPPING.attributes.values():
        assert attribute.rule_ids <= ids, attribute.name
        assert attribute.rule_categories <= categories, attribute.name


def test_model_scores_are_sums_of_the_listed_probabilities() -> None:
    assert MAPPING.model_score("TOXICITY", HARMFUL) == pytest.approx(0.8)
    assert MAPPING.model_score("SEVERE_TOXICITY", HARMFUL) == pytest.approx(0.3)
    assert MAPPING.model_score("IDENTITY_ATTACK", HARMFUL) == pytest.approx(0.3)
    assert MAPPING.model_score("PROFANITY", HARMFUL) == pytest.approx(0.5)
    assert MAPPING.model_score("INSULT", HARMFUL) == pytest.approx(0.7)
    assert MAPPING.model_score("THREAT", HARMFUL) == pytest.approx(0.05)
    assert MAPPING.model_score("SEXUALLY_EXPLICIT", HARMFUL) == pytest.approx(0.4)


def test_a_model_without_harms_falls_back_or_cannot_score() -> None:
    assert MAPPING.model_score("INSULT", NO_HARMS) == pytest.approx(0.5)  # toxicity.offensive
    assert MAPPING.model_score("THREAT", NO_HARMS) is None
    with pytest.raises(Unscorable):
        MAPPING.score("THREAT", NO_HARMS, [])
    # a rule hit still scores it
    assert MAPPING.score("THREAT", NO_HARMS, [_hit("threat", Severity.HIGH)]).value == 0.9


def test_a_rule_hit_raises_the_score_to_its_severitys_probability_and_locates_it() -> None:
    calm = ModelScores((0.1, 0.8, 0.1), (1.0, 0.0, 0.0, 0.0), (0.98, 0.01, 0.01), (0.0,) * 5)
    scored = MAPPING.score("THREAT", calm, [_hit("threat", Severity.CRITICAL)])
    assert scored.value == pytest.approx(0.97)
    assert scored.spans == (((3, 7), pytest.approx(0.97)),)
    # the model wins when it is surer than the rule
    sure = MAPPING.score("TOXICITY", HARMFUL, [_hit("offensive", Severity.LOW)])
    assert sure.value == pytest.approx(0.8)


def test_hits_below_min_severity_or_of_other_categories_do_not_count() -> None:
    calm = ModelScores((0.1, 0.8, 0.1), (1.0, 0.0, 0.0, 0.0), (0.98, 0.01, 0.01), (0.0,) * 5)
    medium = _hit("offensive", Severity.MEDIUM)
    assert MAPPING.score("SEVERE_TOXICITY", calm, [medium]).value == pytest.approx(0.01)
    assert MAPPING.score("SEXUALLY_EXPLICIT", calm, [medium]).value == 0.0
    by_id = _hit("offensive", Severity.MEDIUM, rule_id="en.offensive.profanity")
    assert MAPPING.score("PROFANITY", calm, [by_id]).value == pytest.approx(0.8)


def test_attribution_spans_count_for_the_attributes_of_their_output() -> None:
    scored = MAPPING.score(
        "INSULT", HARMFUL, [], [("harms.insult", (0, 4)), ("intent.spam", (5, 9))]
    )
    assert scored.spans == (((0, 4), pytest.approx(0.7)),)


def _table(**changes: Any) -> dict[str, Any]:
    with ATTRIBUTES_FILE.open("rb") as handle:
        document = tomllib.load(handle)
    document["attributes"]["TOXICITY"].update(changes)
    return document


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"model": ["toxicity.rude"]}, "toxicity.rude"),
        ({"min_severity": "dire"}, "dire"),
        ({"languages": "en"}, "languages"),
    ],
)
def test_a_bad_table_is_refused_naming_the_entry(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(MappingError, match=named):
        parse_mapping(_table(**changes))


def test_rule_scores_must_be_probabilities() -> None:
    document = _table()
    document["rule_scores"]["high"] = 1.5
    with pytest.raises(MappingError, match=r"rule_scores\.high"):
        parse_mapping(document)
