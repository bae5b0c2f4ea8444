"""The everyday-hits check: which rules hit which of a list of ordinary sentences."""

from __future__ import annotations

from modelbuild.everyday_hits import hits_by_rule
from pipelines.rules import RuleEngine, default_ruleset


def test_hits_are_grouped_by_rule_in_input_order() -> None:
    """Each hitting rule lists the lines it hits, in order; clean lines appear nowhere."""
    engine = RuleEngine(default_ruleset())
    lines = ["what a lovely day", "you moron", "we had pasta", "total dumbass"]
    hits = hits_by_rule(engine, lines)
    assert hits["en.offensive.insult"] == ["you moron", "total dumbass"]
    assert not {"what a lovely day", "we had pasta"} & {t for ts in hits.values() for t in ts}
