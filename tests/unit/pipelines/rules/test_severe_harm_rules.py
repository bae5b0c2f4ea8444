"""The severe-harm rules of the default set: their categories, severities and actions, and the
ordinary talk they leave (every rule's examples and near misses are checked in
test_default_ruleset.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleAction, Severity
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.examples import default_rule_examples
from pipelines.severe_harm import is_severe

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENGINE = RuleEngine(default_ruleset())


def _hits(text: str) -> dict[str, tuple[str, Severity, RuleAction]]:
    outcome = ENGINE.evaluate(ChatMessage("m-1", "g-1", "u-1", text, SENT_AT))
    return {hit.rule_id: (hit.category, hit.severity, hit.action) for hit in outcome.hits}


@pytest.mark.parametrize("text", default_rule_examples().no_severe_hits)
def test_ordinary_talk_has_no_severe_hit(text: str) -> None:
    """Idioms, cooking, medicine, sex education and news hit no severe-harm rule."""
    assert not [category for category, _, _ in _hits(text).values() if is_severe(category)]


def test_own_intent_flags_and_incitement_blocks() -> None:
    """Self-harm intent is a critical flag (never a block rule); telling others to do it blocks."""
    assert _hits("i want to kill myself")["en.self_harm.intent"] == (
        "self_harm",
        Severity.CRITICAL,
        RuleAction.FLAG,
    )
    assert _hits("我不想活了")["zh.self_harm.intent"][2] is RuleAction.FLAG
    assert _hits("go kill yourself")["en.self_harm.incitement"][0] == "self_harm_incitement"
    assert _hits("你去死吧")["zh.self_harm.incitement"][2] is RuleAction.BLOCK


def test_minors_are_critical_blocks() -> None:
    """Anything involving minors is a critical block in its own category."""
    assert _hits("selling cp links")["en.sexual_exploitation.minors"] == (
        "sexual_exploitation_minors",
        Severity.CRITICAL,
        RuleAction.BLOCK,
    )
    assert _hits("有没有未成年的裸照")["zh.sexual_exploitation.minors"][2] is RuleAction.BLOCK


def test_regexes_also_search_leetspeak_readings() -> None:
    """A regex rule matches a leetspeak spelling only through the leet reading."""
    assert "en.threat.direct" in _hits("i'll k1ll y0u")
    assert "en.threat.direct" not in _hits("i'll kiIl-y0-u bug")
