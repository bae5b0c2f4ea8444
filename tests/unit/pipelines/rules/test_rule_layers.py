"""Tests for pipelines.rules.layers: a layer extends a base, disables, overrides and adds rules,
and every bad layer is refused with an error naming the layer, the rule and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.rule_hits import RuleAction, Severity
from pipelines.rules import ProfileRule, RuleLoadError, parse_ruleset
from pipelines.rules.layers import (
    MAX_LAYER_BYTES,
    MAX_LAYERS,
    ChangeKind,
    RuleLayerError,
    load_rule_stack,
    stack_files,
)
from tests.unit.pipelines.rules.layer_files import BASE, LAYER, write


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write(tmp_path, "base.toml", BASE)


def _refused(tmp_path: Path, text: str) -> RuleLayerError:
    path = write(tmp_path, "acme.toml", text)
    with pytest.raises(RuleLayerError) as caught:
        load_rule_stack(path)
    assert caught.value.layer == "acme.toml"
    assert str(caught.value).startswith("layer acme.toml: ")
    return caught.value


def test_a_base_loads_as_a_plain_rule_file(base: Path) -> None:
    """A file without ``extends`` makes exactly the rules parse_ruleset makes of it."""
    stack = load_rule_stack(base)
    assert stack.ruleset == parse_ruleset(BASE)
    assert stack.names == ("base.toml",)
    assert stack.paths == (base,)


def test_a_layer_disables_overrides_and_adds(base: Path, tmp_path: Path) -> None:
    """Disabled rules stay (switched off), overridden fields change, added rules follow."""
    stack = load_rule_stack(write(tmp_path, "acme.toml", LAYER))
    rules = stack.ruleset
    assert rules.ids() == ("t.spam.words", "t.threat.words", "t.profile.strikes", "acme.links")
    assert not rules.get("t.spam.words").meta.enabled
    threat = rules.get("t.threat.words").meta
    assert (threat.action, threat.severity) == (RuleAction.BLOCK, Severity.CRITICAL)
    strikes = rules.get("t.profile.strikes")
    assert isinstance(strikes, ProfileRule)
    assert strikes.min_strikes == 5
    assert stack.names == ("base.toml", "acme.toml")
    assert stack.paths == (tmp_path / "acme.toml", base)
    changes = {c.rule_id: c for c in stack.layers[-1].changes}
    assert changes["t.spam.words"].kind is ChangeKind.DISABLED
    assert changes["acme.links"].kind is ChangeKind.ADDED
    assert ("action", "flag", "block") in changes["t.threat.words"].fields
    assert list(stack.layers[-1].examples.rules) == ["acme.links"]
    # The layer below is untouched, and the stack under the top is the base's.
    assert stack.below is not None
    assert stack.below.ruleset == parse_ruleset(BASE)


def test_an_override_may_use_an_exempt_list_the_layer_adds(base: Path, tmp_path: Path) -> None:
    """A layer's own [exempts] list can be named by an override of a rule below."""
    text = """extends = "base.toml"
[exempts]
pharmacy = ['''\\bcheap pills at the pharmacy\\b''']
[overrides."t.spam.words"]
exempt_lists = ["fruit", "pharmacy"]
"""
    rule = load_rule_stack(write(tmp_path, "acme.toml", text)).ruleset.get("t.spam.words")
    assert rule.exempt == (r"\bbanana split\b", r"\bcheap pills at the pharmacy\b")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "rule_id", "problem"),
    [
        ('extends = "base.toml"\ndisable = ["t.nope"]', "t.nope", "cannot disable: no such rule"),
        (
            'extends = "base.toml"\n[overrides."t.nope"]\naction = "block"',
            "t.nope",
            "cannot override: no such rule",
        ),
        (
            'extends = "base.toml"\n[overrides."t.threat.words"]\ncolour = "red"',
            "t.threat.words",
            "cannot override ['colour']",
        ),
        (
            'extends = "base.toml"\n[overrides."t.threat.words"]\ncategory = "spam"',
            "t.threat.words",
            "cannot override ['category']",
        ),
        (
            'extends = "base.toml"\n[overrides."t.profile.strikes"]\nmax_account_age_hours = 3',
            "t.profile.strikes",
            "cannot override ['max_account_age_hours']",
        ),
        (
            'extends = "base.toml"\n[overrides."t.threat.words"]\naction = "nuke"',
            "t.threat.words",
            "'action' must be one of",
        ),
        (
            'extends = "base.toml"\n[overrides."t.spam.words"]\nexempt_lists = ["nope"]',
            "t.spam.words",
            "exempt list 'nope' is not defined",
        ),
        (
            'extends = "base.toml"\n[[rules]]\nid = "t.spam.words"\ncategory = "spam"\n'
            'severity = "low"\naction = "flag"\nkind = "keywords"\nkeywords = ["x"]',
            "t.spam.words",
            "already defined by a layer below",
        ),
        (
            'extends = "base.toml"\n[[rules]]\nid = "acme.new"\ncategory = "spam"\n'
            'severity = "low"\naction = "flag"\nkind = "keywords"\nkeywords = ["x"]',
            "acme.new",
            "added without [[examples]]",
        ),
        (
            'extends = "base.toml"\n[[examples]]\nid = "t.nope"\nexamples = ["a"]\n'
            'near_misses = ["b"]',
            "t.nope",
            "has examples but no such rule",
        ),
        ('extends = "base.toml"\n[exempts]\nfruit = ["apple"]', None, "['fruit'] are defined"),
        ('disable = ["t.spam.words"]', None, "need 'extends'"),
        ('extends = "base.toml"\nimports = ["x"]', None, "unknown top-level keys ['imports']"),
        ('extends = "base.toml"\ndisable = "t.spam.words"', None, "array of rule ids"),
        ("extends = 3", None, "'extends' must be a file name"),
    ],
)
def test_a_bad_layer_is_refused(
    base: Path, tmp_path: Path, text: str, rule_id: str | None, problem: str
) -> None:
    """Each mistake is a RuleLayerError (a RuleLoadError) naming the rule and the problem."""
    error = _refused(tmp_path, text)
    assert isinstance(error, RuleLoadError)
    assert error.rule_id == rule_id
    assert problem in str(error)


def test_a_cycle_in_extends_is_refused(tmp_path: Path) -> None:
    """a extends b extends a: refused, naming the chain."""
    write(tmp_path, "b.toml", 'extends = "acme.toml"')
    error = _refused(tmp_path, 'extends = "b.toml"')
    assert "a cycle in 'extends': acme.toml > b.toml > acme.toml" in str(error)


def test_a_stack_deeper_than_the_bound_is_refused(base: Path, tmp_path: Path) -> None:
    below = "base.toml"
    for level in range(MAX_LAYERS):
        write(tmp_path, f"l{level}.toml", f'extends = "{below}"')
        below = f"l{level}.toml"
    error = _refused(tmp_path, f'extends = "{below}"')
    assert f"more than {MAX_LAYERS} layers" in str(error)


def test_a_missing_or_oversized_layer_is_refused(tmp_path: Path) -> None:
    """The file that cannot be read is the layer named."""
    path = write(tmp_path, "acme.toml", 'extends = "gone.toml"')
    with pytest.raises(RuleLayerError, match=r"layer gone\.toml: rule file: cannot read"):
        load_rule_stack(path)
    big = write(tmp_path, "big.toml", "# " + "x" * MAX_LAYER_BYTES)
    with pytest.raises(RuleLayerError, match="more than the"):
        load_rule_stack(big)


def test_an_error_below_names_the_layer_it_is_in(base: Path, tmp_path: Path) -> None:
    """A broken file below the layer is named, not the layer that extends it."""
    write(tmp_path, "middle.toml", 'extends = "base.toml"\ndisable = ["t.gone"]')
    path = write(tmp_path, "acme.toml", 'extends = "middle.toml"')
    with pytest.raises(RuleLayerError) as caught:
        load_rule_stack(path)
    assert caught.value.layer == "middle.toml"
    assert stack_files(path) == (path, tmp_path / "middle.toml", base)


def test_the_same_files_compose_once(base: Path, tmp_path: Path) -> None:
    """Two tenant files with the same text share the composed rules (and their key)."""
    one = load_rule_stack(write(tmp_path, "one.toml", LAYER))
    two = load_rule_stack(write(tmp_path, "two.toml", LAYER))
    assert one.key == two.key
    assert one.ruleset is two.ruleset
    assert (one.names, two.names) == (("base.toml", "one.toml"), ("base.toml", "two.toml"))
    other = load_rule_stack(write(tmp_path, "three.toml", LAYER + "\n# another tenant\n"))
    assert other.key != one.key
    assert other.ruleset == one.ruleset  # equal rules: one shared engine (shared_engines)
