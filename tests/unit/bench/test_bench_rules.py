"""Tests for bench.rules: its generators and argument parsing (not a timing test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.rules import (
    base_rules_toml,
    chat_messages,
    extra_rules_toml,
    generated_keywords,
    generated_patterns,
    parse_args,
)
from bench.tenant_rules import run_tenants, write_tenant_folder
from pipelines.rules import RuleEngine, parse_ruleset
from pipelines.rules.layers import load_rule_stack


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


def test_tenant_arguments() -> None:
    """--tenants 0 (the default) measures one rule set; stacks must fit the tenants."""
    args = parse_args(["--tenants", "1000", "--stacks", "10"])
    assert (args.tenants, args.stacks) == (1000, 10)
    assert parse_args([]).tenants == 0
    with pytest.raises(SystemExit):
        parse_args(["--tenants", "3", "--stacks", "4"])
    with pytest.raises(SystemExit):
        parse_args(["--tenants", "3", "--stacks", "0"])


def test_the_tenant_folder_holds_loadable_stacks(tmp_path: Path) -> None:
    """Every stack layer loads over the base with its examples; tenants spread over stacks."""
    base = base_rules_toml(parse_args(["--keywords", "5", "--regexes", "0"]))
    write_tenant_folder(tmp_path, base, tenants=5, stacks=2, seed=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_base.toml",
        "_stack0.toml",
        "_stack1.toml",
        "t00000.toml",
        "t00001.toml",
        "t00002.toml",
        "t00003.toml",
        "t00004.toml",
    ]
    stacks = [load_rule_stack(tmp_path / f"t0000{n}.toml") for n in range(3)]
    assert stacks[0].names == ("_base.toml", "_stack0.toml", "t00000.toml")
    assert stacks[0].ruleset == stacks[2].ruleset != stacks[1].ruleset


def test_a_small_tenant_run_ends_with_the_result_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The tenant mode runs end to end and its last line has the documented keys."""
    argv = ["--keywords", "0", "--regexes", "0", "--seconds", "0.05", "--tenants", "3"]
    args = parse_args([*argv, "--stacks", "2"])
    assert run_tenants(args, base_rules_toml(args), chat_messages(40, seed=1)) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"tenant_rule_cost_ratio=\d+\.\d{3} start_s=\d+\.\d rss_mb=\d+", last)
