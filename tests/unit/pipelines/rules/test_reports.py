"""Reported abuse: the frame detector and the rules that yield to it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset, parse_ruleset
from pipelines.rules.config import RuleLoadError
from pipelines.rules.reports import is_report

_SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _ids(engine: RuleEngine, text: str) -> set[str]:
    message = ChatMessage("m-1", "g-1", "u-1", text, _SENT_AT, {})
    return {hit.rule_id for hit in engine.evaluate(message).hits}


@pytest.mark.parametrize(
    "text",
    [
        "someone called me a stupid bitch in DMs, how do I report them?",
        "he keeps calling me a fat cow, what do i do",
        "this guy sent me a dick pic, blocked him",
        "有人私信骂我傻逼，怎么举报",
        "收到陌生人的裸聊邀请，已经拉黑了",
        "他说我是废物，我好难过",
    ],
)
def test_reports_of_received_abuse_are_recognised(text: str) -> None:
    assert is_report(canonicalize(text).text)


@pytest.mark.parametrize(
    "text",
    [
        "举报你啊傻逼",  # names reporting, but is itself an insult
        "i will report you, idiot",
        "call me when you're home",
        "fuck you",
        "你这个傻逼",
        "my name is ass-kicker",
    ],
)
def test_insults_and_ordinary_lines_are_not_reports(text: str) -> None:
    assert not is_report(canonicalize(text).text)


def test_default_profanity_yields_in_a_report_only() -> None:
    engine = RuleEngine(default_ruleset())
    assert "zh.offensive.profanity" in _ids(engine, "你这个傻逼")
    assert "zh.offensive.profanity" not in _ids(engine, "有人私信骂我傻逼，怎么举报")
    assert "zh.offensive.profanity" in _ids(engine, "举报你啊傻逼")
    assert "zh.sexual.solicitation" not in _ids(engine, "收到陌生人的裸聊邀请，已经拉黑了")
    assert "en.offensive.profanity_at_someone" in _ids(engine, "you fucking idiot")
    assert "en.offensive.profanity_at_someone" not in _ids(
        engine, "someone called me a fucking idiot"
    )


def test_rules_without_the_key_still_hit_in_a_report() -> None:
    """Self-harm rules do not yield to the report frame: own intent told inside a report still
    hits. Only the reported instruction itself is exempt (the rule's ``exempt`` spans)."""
    engine = RuleEngine(default_ruleset())
    report = "mods, this user keeps telling me to kill myself, please help"
    assert is_report(canonicalize(report).text)
    assert "en.self_harm.intent" not in _ids(engine, report)
    assert "en.self_harm.intent" in _ids(
        engine, "mods, this user keeps telling me to kill myself and i really want to die"
    )


_RULE = """[[rules]]
id = "t.words"
category = "test"
severity = "medium"
action = "{action}"
kind = "keywords"
keywords = ["badword"]
{extra}
"""


def test_the_key_is_per_rule_and_validated() -> None:
    plain = RuleEngine(parse_ruleset(_RULE.format(action="flag", extra="")))
    yielding = RuleEngine(
        parse_ruleset(_RULE.format(action="flag", extra="yields_to_reports = true"))
    )
    report = "badword spam in my inbox, how do i report it"
    assert _ids(plain, report) == {"t.words"}
    assert _ids(yielding, report) == set()
    assert _ids(yielding, "you badword") == {"t.words"}
    with pytest.raises(RuleLoadError, match="must be a boolean"):
        parse_ruleset(_RULE.format(action="flag", extra='yields_to_reports = "yes"'))
    with pytest.raises(RuleLoadError, match="not allowed on a block rule"):
        parse_ruleset(_RULE.format(action="block", extra="yields_to_reports = true"))


def test_yields_to_model_is_carried_on_the_hit_and_validated() -> None:
    """The key travels on the rule's hits (the policy weighs it) and is refused where the model
    cannot judge: on block rules and in the severe categories."""
    engine = RuleEngine(parse_ruleset(_RULE.format(action="flag", extra="yields_to_model = true")))
    hits = engine.evaluate(ChatMessage("m-1", "g-1", "u-1", "you badword", _SENT_AT, {})).hits
    assert [hit.yields_to_model for hit in hits] == [True]
    with pytest.raises(RuleLoadError, match="must be a boolean"):
        parse_ruleset(_RULE.format(action="flag", extra='yields_to_model = "yes"'))
    with pytest.raises(RuleLoadError, match="flag rules only"):
        parse_ruleset(_RULE.format(action="block", extra="yields_to_model = true"))
    with pytest.raises(RuleLoadError, match="not allowed in category 'threat'"):
        parse_ruleset(
            _RULE.format(action="flag", extra="yields_to_model = true").replace(
                'category = "test"', 'category = "threat"'
            )
        )
