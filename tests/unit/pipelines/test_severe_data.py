"""The severe categories as data (``pipelines/rulesets/severe_categories.toml``): the table the
policy and the queue read, its examples caught in their category, bad tables refused."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import pytest

from pipelines.data_files import DataFileError, read_data_file
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.severe_harm import (
    NEVER_BLOCKED,
    REVIEW_PRIORITY_FLOOR,
    SEVERE_CATEGORIES,
    SHIPPED,
    URGENT_CATEGORIES,
    SevereCategory,
    read_severe_table,
)

_FILE = resources.files("pipelines").joinpath("rulesets", "severe_categories.toml")


def test_the_shipped_table() -> None:
    assert SEVERE_CATEGORIES == (
        "self_harm",
        "sexual_exploitation_minors",
        "threat",
        "sexual_exploitation",
        "self_harm_incitement",
    )
    assert {"self_harm", "sexual_exploitation_minors"} == URGENT_CATEGORIES
    assert {"self_harm"} == NEVER_BLOCKED
    assert dict(REVIEW_PRIORITY_FLOOR) == {
        "self_harm": 1.0,
        "sexual_exploitation_minors": 1.0,
        "threat": 0.85,
        "sexual_exploitation": 0.85,
        "self_harm_incitement": 0.8,
    }
    extended = SHIPPED.with_categories([SevereCategory("child_safety", 1.0, urgent=True)])
    assert extended.is_severe("child_safety")
    assert extended.urgent == URGENT_CATEGORIES | {"child_safety"}


def test_each_categorys_examples_are_caught_in_it() -> None:
    engine = RuleEngine(default_ruleset())
    for entry in read_data_file(_FILE).body["categories"]:
        for text in entry["examples"]:
            message = ChatMessage("m", "g", "u", text, datetime(2026, 1, 1, tzinfo=UTC))
            assert entry["name"] in {hit.category for hit in engine.evaluate(message).hits}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ('name = "threat"\nfloor = 1.5\nexamples = ["x"]', "floor must be a number"),
        ('name = "threat"\nfloor = 0.5\nurgent = "yes"\nexamples = ["x"]', "urgent must be"),
        ('name = "threat"\nfloor = 0.5', "examples must be"),
        ('name = "threat"\nfloor = 0.5\nexamples = ["x"]\nwhy = 1', "unknown keys"),
        ('name = "other"\nfloor = 0.5\nexamples = ["x"]', "lacks the categories"),
    ],
)
def test_a_bad_table_is_refused(tmp_path: Path, entry: str, problem: str) -> None:
    path = tmp_path / "severe.toml"
    path.write_text(
        f'[[categories]]\n{entry}\n[provenance]\nsource = "s"\nlicence = "l"\npurpose = "p"\n',
        encoding="utf-8",
    )
    with pytest.raises(DataFileError, match=problem):
        read_severe_table(read_data_file(path))
