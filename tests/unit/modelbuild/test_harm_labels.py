"""The harm labels: every topic the table names exists, the table is consistent, and labels
follow it (benign lines are 0 everywhere, mixed topics unknown)."""

from __future__ import annotations

from modelbuild.harm_labels import HARMS, UNKNOWN, harm_lines, harm_topics, label_vector
from modelbuild.training_data import template_lines
from modelbuild.written_lines import written_lines
from pipelines.scores import HARM_LABELS


def test_harms_are_the_contract_order() -> None:
    assert HARMS == HARM_LABELS


def test_every_named_topic_exists() -> None:
    known = {line.topic for line in written_lines()}
    for name in ("threats", "abuse"):
        known |= {f"{name}:{line.topic}" for line in template_lines(name, 1)}
    table = harm_topics()
    named = set().union(*table.positive.values(), *table.mixed.values())
    assert named <= known, sorted(named - known)


def test_label_vectors_follow_the_table() -> None:
    assert label_vector("threat", benign=True) == tuple(0.0 for _ in HARMS)
    threat = label_vector("threat", benign=False)
    assert threat[HARMS.index("threat")] == 1.0
    assert threat[HARMS.index("insult")] == 0.0
    mixed = label_vector("self_harm", benign=False)
    assert mixed[HARMS.index("self_harm")] == UNKNOWN
    assert mixed[HARMS.index("self_harm_incitement")] == UNKNOWN
    assert label_vector("spam_chat", benign=False) == tuple(0.0 for _ in HARMS)


def test_every_harm_has_positive_lines_in_both_languages() -> None:
    lines = harm_lines(20241202)
    for column, harm in enumerate(HARMS):
        for lang in ("en", "zh"):
            count = sum(1 for line in lines if line.lang == lang and line.labels[column] == 1.0)
            assert count >= 20, (harm, lang, count)
