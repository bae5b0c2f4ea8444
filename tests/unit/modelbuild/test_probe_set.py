"""Probe L loads with its sizes, and no dev-set or training line is a probe line."""

from __future__ import annotations

from collections import Counter

from modelbuild.canonical_inputs import canonical_text
from modelbuild.devset import CATEGORIES, read_devset
from modelbuild.probe_set import EVERYDAY, EVERYDAY_SUBSETS, probe_lines
from modelbuild.training_data import FAMILY_FILES, template_lines

SEED = 20241202


def _with_canonical(texts: set[str]) -> set[str]:
    return texts | {canonical_text(t) for t in texts}


def test_every_category_has_forty_plain_and_twenty_disguised_lines_per_language() -> None:
    """Sizes that give a rate per category: 40 plain, 20 disguised, in English and Chinese;
    everyday lines in four subsets; no line twice."""
    lines = probe_lines()
    harmful = Counter((e.lang, e.category, e.form) for e in lines if e.harmful)
    assert set(harmful.values()) == {40, 20}
    assert {(lang, c) for lang, c, _ in harmful} == {
        (lang, c) for lang in ("en", "zh") for c in CATEGORIES
    }
    everyday = Counter((e.lang, e.topic) for e in lines if not e.harmful)
    assert {topic for _, topic in everyday} == set(EVERYDAY_SUBSETS)
    assert {e.category for e in lines if not e.harmful} == {EVERYDAY}
    assert sum(n for (lang, _), n in everyday.items() if lang == "en") >= 400
    assert len({e.text for e in lines}) == len(lines)


def test_no_dev_set_or_training_family_line_is_a_probe_line() -> None:
    """The probe measures lines no build trained or tuned on: no dev-set line and no line of a
    training family (as many lines as the families can make) equals one, raw or canonical."""
    probe = _with_canonical({e.text for e in probe_lines()})
    dev = _with_canonical({e.text for e in read_devset()})
    trained = {
        line.text for name in FAMILY_FILES for line in template_lines(name, SEED, per_family=400)
    }
    assert not probe & dev
    assert not probe & _with_canonical(trained)
