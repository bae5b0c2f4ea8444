"""The shipped rules decide every corpus line exactly as before their phrase knowledge (report
and mention frames, named spans, emoji readings, the severe categories) moved from Python into
data files (``pipelines/phrases/``, ``pipelines/rulesets/severe_categories.toml``).

``rule_decisions.json`` was written by ``decision_corpus`` with the code of commit 6b1a094, the
last before the move: a digest per line of the canonical text, the report reading, the
mentioned spans and every hit with its spans. A line whose digest differs is named here; lines
added to a corpus since are not in the record. A deliberate change of what the rules decide
writes the record again (``python -m tests.unit.pipelines.rules.decision_corpus``).
"""

from __future__ import annotations

import json

import pytest

from pipelines.rules import RuleEngine, default_ruleset
from tests.unit.pipelines.rules.decision_corpus import (
    GOLDEN,
    corpora,
    line_digest,
    recorded,
    text_key,
)

BEFORE: dict[str, str] = json.loads(GOLDEN.read_text())
ENGINE = RuleEngine(default_ruleset())


@pytest.mark.parametrize("corpus", sorted(BEFORE))
def test_every_line_is_decided_as_before(corpus: str) -> None:
    before = recorded(BEFORE[corpus])
    lines = [text for text in corpora()[corpus] if text_key(text) in before]
    assert len(lines) >= len(before) * 0.9, "most recorded lines are gone: write the record again"
    changed = [text for text in lines if line_digest(ENGINE, text) != before[text_key(text)]]
    assert changed == []


def test_the_record_covers_every_corpus() -> None:
    assert (
        set(BEFORE)
        == set(corpora())
        == {
            "default_examples",
            "adversarial_dev",
            "samples",
            "written_lines",
        }
    )
