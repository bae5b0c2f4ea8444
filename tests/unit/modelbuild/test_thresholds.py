"""Threshold selection: the sweep decides as the policy does, and picks within its budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from modelbuild.probe_set import probe_lines
from modelbuild.thresholds import choose, grade, probe_rows, sweep_lines
from pipelines.policy import PolicyThresholds
from pipelines.scores import ModelScores


def _scores(toxic: float, spam: float = 0.0) -> ModelScores:
    none = 1.0 - toxic
    return ModelScores((0.3, 0.4, 0.3), (1.0 - spam, 0.0, spam, 0.0), (none, toxic, 0.0))


class TableScorer:
    """Scores looked up by text: 'tox=0.7' gives P(offensive) 0.7."""

    def __call__(self, texts: Sequence[str]) -> list[ModelScores]:
        out = []
        for text in texts:
            value = float(text.split("=")[1]) if "=" in text else 0.0
            out.append(_scores(0.0, spam=value) if text.startswith("spam") else _scores(value))
        return out


TEXTS = ["tox=0.9", "tox=0.72", "tox=0.58", "spam=0.8", "tox=0.7", "tox=0.1", "tox=0.2"]
HARMFUL = [True, True, True, True, False, False, False]


def test_grades_match_the_policy_at_the_defaults() -> None:
    """At the default thresholds (offensive 0.65): 0.9 and 0.72 caught, 0.58 not, spam 0.8
    caught; the benign 0.7 is flagged, 0.1 and 0.2 are not."""
    lines, _ = sweep_lines(TEXTS, HARMFUL, ["en"] * len(TEXTS), TableScorer())
    got = grade(lines, PolicyThresholds())
    assert got.catch == 0.75
    assert got.everyday_fpr == pytest.approx(1 / 3, abs=1e-4)


def test_choice_respects_the_budget_and_prefers_catch() -> None:
    """With no false positive allowed the offensive threshold must rise above the benign 0.7
    (the grid's next value, 0.75, also loses 0.72; the spam threshold stays at or under 0.8);
    with one in three allowed it falls to 0.55 and catches every line."""
    lines, _ = sweep_lines(TEXTS, HARMFUL, ["en"] * len(TEXTS), TableScorer())
    strict = choose(lines, PolicyThresholds(), max_everyday_fpr=0.0)
    assert strict.everyday_fpr == 0.0
    assert strict.thresholds.flag_offensive > 0.7
    assert strict.thresholds.flag_spam <= 0.8
    assert strict.catch == 0.5
    loose = choose(lines, PolicyThresholds(), max_everyday_fpr=0.34)
    assert loose.catch == 1.0
    assert loose.thresholds.flag_offensive <= 0.55
    assert loose.thresholds.escalate_low == loose.thresholds.flag_offensive


def test_an_impossible_budget_is_refused() -> None:
    """A budget nothing meets raises instead of returning a choice that breaks it."""
    texts = ["tox=0.99", "tox=0.95"]
    lines, _ = sweep_lines(texts, [True, False], ["en", "en"], TableScorer())
    with pytest.raises(ValueError, match="no thresholds"):
        choose(lines, replace(PolicyThresholds()), max_everyday_fpr=0.0)


def test_probe_rows_joins_the_named_read_probes_with_their_labels() -> None:
    """``--with-probes l,m`` adds both probes' lines, harmful and everyday, in order."""
    rows = probe_rows("l, m")
    expected = [*probe_lines("probe_l"), *probe_lines("probe_m")]
    assert rows == [(line.text, line.lang, line.harmful) for line in expected]
    assert {harmful for _, _, harmful in rows} == {True, False}
    assert probe_rows("") == []


def test_probe_rows_refuses_a_name_that_is_no_probe() -> None:
    with pytest.raises(ValueError, match="probe_z"):
        probe_rows("l,z")


def test_the_sweep_lets_the_model_clear_a_yielding_word_rule_as_the_policy_does() -> None:
    """A profanity word (``en.offensive.profanity`` yields to the model) in its ordinary sense:
    cleared at toxic 0.001, a flag at 0.3, as ``policy.decide`` has it."""
    texts = ["a needy little bastard of a starter tox=0.001", "a needy little bastard tox=0.3"]
    lines, _ = sweep_lines(texts, [False, True], ["en", "en"], TableScorer())
    assert list(lines.rule_clearable) == [True, True]
    got = grade(lines, PolicyThresholds())
    assert (got.catch, got.everyday_fpr) == (1.0, 0.0)
    off = grade(lines, replace(PolicyThresholds(), model_clears_below=0.0))
    assert (off.catch, off.everyday_fpr) == (1.0, 1.0)
