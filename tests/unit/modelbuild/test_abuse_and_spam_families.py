"""Abuse, chat-spam and benign-twin templates: seeded, labelled, disguised, apart from the dev
set."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from modelbuild.canonical_inputs import canonical_text
from modelbuild.datasets import INTENT, TOXICITY, TaskData
from modelbuild.devset import read_devset
from modelbuild.robust_data import ABUSE_SOURCE, HARD_NEGATIVE_SOURCE, SPAM_SOURCE, robust_task
from modelbuild.training_data import template_lines, word_lists
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset

SEED = 20241202
_LEXICONS = {"en": ["moron"], "zh": ["废物"], "zh_ads": ["代购"]}


def _dev_texts() -> set[str]:
    dev = {e.text for e in read_devset()}
    return dev | {canonical_text(t) for t in dev}


def test_abuse_lines_depend_on_the_seed_and_cover_both_labels_and_languages() -> None:
    lines = template_lines("abuse", SEED)
    assert lines == template_lines("abuse", SEED)
    assert lines != template_lines("abuse", SEED + 1)
    groups = Counter((line.label, line.lang) for line in lines)
    assert set(groups) == {(lab, lang) for lab in ("offensive", "hate") for lang in ("en", "zh")}
    assert min(groups.values()) >= 40
    assert not [line.text for line in lines if "{" in line.text]


def test_spam_lines_depend_on_the_seed_in_both_languages() -> None:
    lines = template_lines("spam", SEED)
    assert lines == template_lines("spam", SEED)
    assert lines != template_lines("spam", SEED + 1)
    assert {line.lang for line in lines} == {"en", "zh"}
    assert not [line.text for line in lines if "{" in line.text]


def test_no_line_is_a_dev_set_line() -> None:
    """No generated line equals a dev-set line, raw or canonicalised (the dev set only measures)."""
    dev = _dev_texts()
    lines = {line.text for line in template_lines("abuse", SEED, per_family=400)}
    lines |= {line.text for line in template_lines("spam", SEED, per_family=400)}
    assert not (lines | {canonical_text(t) for t in lines}) & dev


def test_toxicity_gets_abuse_with_its_labels_and_disguised_forms() -> None:
    out = robust_task(TaskData("toxicity", TOXICITY, ()), _LEXICONS, SEED).examples
    abuse = [e for e in out if e.source == ABUSE_SOURCE]
    assert {TOXICITY[e.label] for e in abuse} == {"offensive", "hate"}
    assert any(e.test for e in abuse)
    assert not all(e.test for e in abuse)
    assert any(e.source.startswith("augment-") for e in out)


def test_intent_gets_spam_lines_labelled_spam() -> None:
    out = robust_task(TaskData("intent", INTENT, ()), _LEXICONS, SEED).examples
    spam = [e for e in out if e.source == SPAM_SOURCE]
    assert spam
    assert {INTENT[e.label] for e in spam} == {"spam"}
    assert any(e.test for e in spam)
    assert not all(e.test for e in spam)


def test_counterfactual_twins_use_the_abuse_families_groups_and_are_benign() -> None:
    """Every group the hate families attack also appears in neutral twins, which the build adds
    as hard negatives (toxicity none), in both languages, apart from the dev set."""
    twins = template_lines("counterfactuals", SEED)
    assert twins == template_lines("counterfactuals", SEED)
    text = " ".join(line.text for line in twins)
    groups = word_lists()["en_groups"] + word_lists()["zh_groups"]
    assert [g for g in groups if g not in text] == []
    assert {line.lang for line in twins} == {"en", "zh"}
    dev = _dev_texts()
    lines = {line.text for line in template_lines("counterfactuals", SEED, per_family=400)}
    assert not (lines | {canonical_text(t) for t in lines}) & dev
    out = robust_task(TaskData("toxicity", TOXICITY, ()), _LEXICONS, SEED).examples
    benign = {e.text for e in out if e.source == HARD_NEGATIVE_SOURCE}
    assert {canonical_text(line.text) for line in twins} <= benign
    labels = {e.label for e in out if e.source == HARD_NEGATIVE_SOURCE}
    assert labels == {TOXICITY.index("none")}


def test_no_benign_twin_fires_a_default_rule() -> None:
    """The twins are trained as benign; a rule firing on one would make model and rules disagree
    (it found 你哥哥…, "your brother", read as the slur 尼哥 through its homophone)."""
    engine = RuleEngine(default_ruleset())
    sent_at = datetime(2026, 5, 1, tzinfo=UTC)
    fired = [
        line.text
        for line in template_lines("counterfactuals", SEED, per_family=400)
        if engine.evaluate(ChatMessage("m", "g", "u", line.text, sent_at)).hits
    ]
    assert fired == []
