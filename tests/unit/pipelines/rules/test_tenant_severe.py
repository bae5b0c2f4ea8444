"""A layer's own severe category (``[severe.<name>]``): its hits get the severe treatment from
the policy (always escalated, the priority floor, urgent first), and bad ones are refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.messages import ChatMessage
from pipelines.policy import PolicyThresholds, decide
from pipelines.rules import RuleEngine
from pipelines.rules.layers import RuleLayerError, load_rule_stack
from pipelines.rules.shared_engines import EngineShelf
from pipelines.severe_harm import SHIPPED
from tests.unit.pipelines.rules.layer_files import BASE, write

_LAYER = """extends = "base.toml"
[severe.child_safety]
floor = 0.95
urgent = true
[[rules]]
id = "acme.child_safety.meetup"
category = "child_safety"
severity = "medium"
action = "flag"
kind = "keywords"
keywords = ["meet me after school alone"]
[[examples]]
id = "acme.child_safety.meetup"
examples = ["meet me after school alone"]
near_misses = ["meet me after school"]
"""


def _decide(engine: RuleEngine, text: str) -> tuple[bool, float, str]:
    message = ChatMessage("m", "g", "u", text, datetime(2026, 1, 1, tzinfo=UTC))
    result = decide(engine.evaluate(message), None, PolicyThresholds(), model_available=False)
    return result.escalate, result.priority, result.category


def test_a_layers_severe_category_gets_the_severe_treatment(tmp_path: Path) -> None:
    write(tmp_path, "base.toml", BASE)
    stack = load_rule_stack(write(tmp_path, "acme.toml", _LAYER))
    assert stack.severe.is_severe("child_safety")
    assert stack.severe.urgent == SHIPPED.urgent | {"child_safety"}
    assert stack.below is not None
    assert stack.below.severe == SHIPPED
    engine = EngineShelf(2).engine_for(stack)[0].engine  # as the tenant folder builds it
    assert engine.severe == stack.severe
    text = "meet me after school alone"
    assert _decide(engine, text) == (True, 0.95, "child_safety")
    # The same rule without the layer's category is an ordinary flag.
    escalate, priority, _ = _decide(RuleEngine(stack.ruleset), text)
    assert not escalate
    assert priority < 0.95


@pytest.mark.parametrize(
    ("severe", "problem"),
    [
        ("[severe.threat]\nfloor = 0.9", "'threat' is already a severe category"),
        ("[severe.child_safety]\nfloor = 2", "floor must be a number in (0, 1]"),
        ("[severe.child_safety]\nfloor = 0.9\nurgent = 1", "urgent must be true or false"),
        ("[severe.child_safety]\nfloor = 0.9\nname = 'x'", "unknown keys ['name']"),
        ("[severe.Child]\nfloor = 0.9", "must match"),
        ("severe = 3", "'severe' must be a table of tables"),
        (
            '[severe.spam]\nfloor = 0.9\n[overrides."t.spam.words"]\nyields_to_model = true',
            "'yields_to_model' is not allowed in category 'spam', severe in this stack",
        ),
    ],
)
def test_a_bad_severe_category_is_refused(tmp_path: Path, severe: str, problem: str) -> None:
    write(tmp_path, "base.toml", BASE)
    path = write(tmp_path, "acme.toml", 'extends = "base.toml"\n' + severe)
    with pytest.raises(RuleLayerError) as caught:
        load_rule_stack(path)
    assert problem in str(caught.value)
