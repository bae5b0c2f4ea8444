"""Threat and self-harm templates: seeded, labelled offensive, disguised, apart from the dev set."""

from __future__ import annotations

from collections import Counter

from modelbuild.canonical_inputs import canonical_text
from modelbuild.datasets import TOXICITY, TaskData
from modelbuild.devset import read_devset
from modelbuild.robust_data import THREAT_SOURCE, robust_task
from modelbuild.training_data import template_lines

SEED = 20241202
_LEXICONS = {"en": ["moron"], "zh": ["废物"], "zh_ads": ["代购"]}


def test_same_seed_same_lines_in_both_languages() -> None:
    """Lines depend only on the seed; both languages have threats and self-harm incitement."""
    lines = template_lines("threats", SEED)
    assert lines == template_lines("threats", SEED)
    assert lines != template_lines("threats", SEED + 1)
    topics = Counter((t.lang, t.topic) for t in lines)
    wanted = ("threat", "self_harm", "self_harm_incitement")
    assert set(topics) == {(lang, t) for lang in ("en", "zh") for t in wanted}
    assert min(topics.values()) >= 20
    assert not [t.text for t in lines if "{" in t.text]


def test_no_line_is_a_dev_set_line() -> None:
    """No threat line equals a dev-set line, raw or canonicalised."""
    dev = {e.text for e in read_devset()}
    dev |= {canonical_text(t) for t in dev}
    lines = {t.text for t in template_lines("threats", SEED, per_family=200)}
    assert not (lines | {canonical_text(t) for t in lines}) & dev


def test_toxicity_gets_them_as_offensive_with_disguised_forms() -> None:
    """In toxicity the threats are offensive (some held out) and their training lines are also
    given in disguised forms, labelled as harmful too."""
    out = robust_task(TaskData("toxicity", TOXICITY, ()), _LEXICONS, SEED).examples
    threats = [e for e in out if e.source == THREAT_SOURCE]
    assert threats
    assert {TOXICITY[e.label] for e in threats} == {"offensive"}
    assert any(e.test for e in threats)
    assert not all(e.test for e in threats)
    disguised = [e for e in out if e.source.startswith("augment-")]
    assert disguised
    # threats are offensive; the abuse families added beside them also bring hate
    assert "offensive" in {TOXICITY[e.label] for e in disguised}
    assert {TOXICITY[e.label] for e in disguised} <= {"offensive", "hate"}
    assert not [e for e in disguised if e.test]
