"""The layers shipped as worked examples (``pipelines/rulesets/layers/``) load over the default
set and their own examples, near misses and everyday lines hold, as the default set's do."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from pipelines.rules import RuleEngine
from pipelines.rules.example_check import check_stack, examples_count
from pipelines.rules.layers import DEFAULT_LAYER, load_rule_stack

LAYERS = sorted(
    Path(str(resources.files("pipelines").joinpath("rulesets", "layers"))).glob("*.toml")
)


def test_there_is_a_shipped_layer() -> None:
    assert LAYERS


@pytest.mark.parametrize("path", LAYERS, ids=lambda path: path.name)
def test_shipped_layer_examples_hold(path: Path) -> None:
    stack = load_rule_stack(path)
    assert stack.names[0] == DEFAULT_LAYER
    assert examples_count(stack.layers[-1].examples) > 0
    failures = check_stack(stack, lambda s: RuleEngine(s.ruleset), skip={DEFAULT_LAYER})
    assert [str(f) for f in failures] == []
