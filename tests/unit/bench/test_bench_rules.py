"""Tests for bench.rules: its generators and argument parsing (not a timing test)."""

from __future__ import annotations

import pytest

from bench.rules import (
    chat_messages,
    extra_rules_toml,
    generated_keywords,
    generated_patterns,
    parse_args,
)
from pipelines.rules import RuleEngine, parse_ruleset


def test_generators_are_deterministic_and_distinct() -> None:
    """Same seed, same keywords; all distinct; Latin and Chinese both present."""
    keywords = generated_keywords(300, seed=3)
    assert keywords == generated_keywords(300, seed=3)
    assert len(set(keywords)) == 300
    assert any(keyword.isascii() for keyword in keywords)
    assert any(not keyword.isascii() for keyword in keywords)
    assert len(generated_patterns(7, seed=3)) == 7


def test_generated_rules_load_into_an_engine() -> None:
    """The generated keywords and patterns form a valid rule file the engine accepts."""
    toml = extra_rules_toml(generated_keywords(2500, seed=1), generated_patterns(9, seed=1))
    ruleset = parse_ruleset(toml)
    assert len(ruleset.rules) == 4  # three keyword rules of up to 1,000 and one regex rule
    RuleEngine(ruleset)


def test_chat_messages_come_from_the_samples() -> None:
    """Messages are built from the shipped sample lines, with distinct ids."""
    messages = chat_messages(50, seed=2)
    assert len(messages) == 50
    assert len({message.message_id for message in messages}) == 50
    assert all(message.text for message in messages)


def test_parse_args_defaults_and_overrides() -> None:
    """Defaults are the documented workload; flags override them."""
    args = parse_args([])
    assert (args.keywords, args.regexes, args.seconds) == (10_000, 100, 3.0)
    args = parse_args(["--keywords", "5", "--regexes", "0", "--seconds", "0.5"])
    assert (args.keywords, args.regexes, args.seconds) == (5, 0, 0.5)


def test_parse_args_rejects_bad_values() -> None:
    """A non-positive measuring time is a usage error."""
    with pytest.raises(SystemExit):
        parse_args(["--seconds", "0"])
