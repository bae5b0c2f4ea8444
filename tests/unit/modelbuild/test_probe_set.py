"""The probe sets load with their sizes, and no dev-set or training line is a probe line."""

from __future__ import annotations

from collections import Counter

import pytest

from modelbuild.canonical_inputs import canonical_text
from modelbuild.devset import CATEGORIES, read_devset
from modelbuild.probe_set import EVERYDAY, EVERYDAY_SUBSETS, PROBES, probe_lines
from modelbuild.training_data import FAMILY_FILES, template_lines
from modelbuild.written_lines import written_lines

SEED = 20241202


def _with_canonical(texts: set[str]) -> set[str]:
    return texts | {canonical_text(t) for t in texts}


@pytest.mark.parametrize("name", PROBES)
def test_every_category_has_forty_plain_and_twenty_disguised_lines_per_language(
    name: str,
) -> None:
    """Sizes that give a rate per category: 40 plain, 20 disguised, in English and Chinese
    (probes M, O, R and U lost up to six of a list that equalled a dev-set, training or earlier
    probe line); everyday lines in four subsets; no line twice."""
    lines = probe_lines(name)
    harmful = Counter((e.lang, e.category, e.form) for e in lines if e.harmful)
    assert all(
        34 <= n <= 40 if form == "plain" else 16 <= n <= 20 for (_, _, form), n in harmful.items()
    )
    assert {(lang, c) for lang, c, _ in harmful} == {
        (lang, c) for lang in ("en", "zh") for c in CATEGORIES
    }
    everyday = Counter((e.lang, e.topic) for e in lines if not e.harmful)
    assert {topic for _, topic in everyday} == set(EVERYDAY_SUBSETS)
    assert {e.category for e in lines if not e.harmful} == {EVERYDAY}
    assert sum(n for (lang, _), n in everyday.items() if lang == "en") >= 400
    assert len({e.text for e in lines}) == len(lines)
    assert {e.source for e in lines} == {name}


@pytest.mark.parametrize("name", PROBES)
def test_no_dev_set_or_training_line_is_a_probe_line(name: str) -> None:
    """A probe measures lines no build trained or tuned on: no dev-set line, no line of a
    training family (as many lines as the families can make) and no written training line
    equals one, raw or canonical."""
    probe = _with_canonical({e.text for e in probe_lines(name)})
    dev = _with_canonical({e.text for e in read_devset()})
    trained = {
        line.text for name in FAMILY_FILES for line in template_lines(name, SEED, per_family=400)
    }
    trained |= {line.text for line in written_lines()}
    assert not probe & dev
    assert not probe & _with_canonical(trained)


def test_an_unknown_probe_is_refused() -> None:
    with pytest.raises(KeyError, match="not a probe"):
        probe_lines("probe_z")
