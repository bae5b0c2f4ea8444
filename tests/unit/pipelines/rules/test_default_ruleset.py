"""Every rule of the shipped default set fires on its examples and not on its near misses
(``pipelines/rulesets/default_examples.toml``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.messages import ChatMessage
from pipelines.rule_hits import Severity
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.examples import default_rule_examples

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENGINE = RuleEngine(default_ruleset())

EXAMPLES = default_rule_examples()
PROFILE_RULES = {"profile.new_account_link", "profile.repeat_offender"}


NEW_ACCOUNT = {"sender_joined_at": (SENT_AT - timedelta(hours=1)).isoformat()}
OLD_ACCOUNT = {"sender_joined_at": (SENT_AT - timedelta(days=30)).isoformat()}


def _hit_ids(text: str, metadata: Mapping[str, object] | None = None) -> set[str]:
    message = ChatMessage("m-1", "g-1", "u-1", text, SENT_AT, metadata or {})
    return {hit.rule_id for hit in ENGINE.evaluate(message).hits}


def test_every_default_rule_has_examples_and_near_misses() -> None:
    """A rule added to default.toml without examples and near misses in default_examples.toml
    (or examples of a rule that no longer exists) fails this test; profile rules are tested
    below on metadata."""
    assert list(EXAMPLES.rules) == [i for i in default_ruleset().ids() if i not in PROFILE_RULES]


@pytest.mark.parametrize(
    ("rule_id", "text"),
    [(r.rule_id, text) for r in EXAMPLES.rules.values() for text in r.examples],
)
def test_rule_fires(rule_id: str, text: str) -> None:
    """The rule fires on its example."""
    assert rule_id in _hit_ids(text)


@pytest.mark.parametrize(
    ("rule_id", "text"),
    [(r.rule_id, text) for r in EXAMPLES.rules.values() for text in r.near_misses],
)
def test_rule_ignores_near_miss(rule_id: str, text: str) -> None:
    """The rule does not fire on a benign text that resembles its example."""
    assert rule_id not in _hit_ids(text)


def test_new_account_link_rule() -> None:
    """A one-hour-old account posting a link is flagged; a month-old one, or no link, is not."""
    assert "profile.new_account_link" in _hit_ids("check https://deal.example", NEW_ACCOUNT)
    assert "profile.new_account_link" not in _hit_ids("check https://deal.example", OLD_ACCOUNT)
    assert "profile.new_account_link" not in _hit_ids("hello everyone", NEW_ACCOUNT)


def test_repeat_offender_rule() -> None:
    """Three strikes escalate; two do not."""
    assert "profile.repeat_offender" in _hit_ids("hello", {"sender_strikes": 3})
    assert "profile.repeat_offender" not in _hit_ids("hello", {"sender_strikes": 2})


@pytest.mark.parametrize("text", EXAMPLES.no_hits)
def test_ordinary_chat_has_no_hits(text: str) -> None:
    """Everyday English and Chinese chat triggers no rule."""
    assert _hit_ids(text) == set()


def test_decisive_and_escalating_defaults() -> None:
    """Slurs, clear scams and threats against a family block at once; a direct threat flags."""
    slur = ENGINE.evaluate(ChatMessage("m", "g", "u", "faggot", SENT_AT))
    assert slur.is_decisive
    threat = ENGINE.evaluate(ChatMessage("m", "g", "u", "我要杀了你", SENT_AT))
    assert {hit.severity for hit in threat.hits} == {Severity.CRITICAL}
    assert not threat.is_decisive
    family = ENGINE.evaluate(ChatMessage("m", "g", "u", "我要杀你全家", SENT_AT))
    assert family.is_decisive
    scam = ENGINE.evaluate(ChatMessage("m", "g", "u", "兼职刷单 日结", SENT_AT))
    assert scam.is_decisive
