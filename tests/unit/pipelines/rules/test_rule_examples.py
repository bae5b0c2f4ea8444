"""The rule examples file's loader: its provenance, and the mistakes it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.data_files import DataFileError, read_data_file
from pipelines.rules.examples import default_rule_examples, parse_rule_examples

FILE = """
[provenance]
source = "by hand"
licence = "Apache-2.0"
purpose = "test"

[everyday]
no_hits = ["hello"]
no_severe_hits = ["this game is killing me"]

[[rules]]
id = "en.offensive.insult"
examples = ["you moron"]
near_misses = ["oxymoron"]
"""


def _parse(tmp_path: Path, text: str) -> object:
    path = tmp_path / "examples.toml"
    path.write_text(text, encoding="utf-8")
    return parse_rule_examples(read_data_file(path))


def test_the_shipped_file_says_where_its_lines_come_from() -> None:
    """default_examples.toml carries its provenance and both everyday lists."""
    shipped = default_rule_examples()
    assert "by hand" in shipped.provenance.source
    assert shipped.no_hits
    assert shipped.no_severe_hits
    assert all(r.examples and r.near_misses for r in shipped.rules.values())


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (('near_misses = ["oxymoron"]', ""), "near_misses must be a non-empty array"),
        (('near_misses = ["oxymoron"]', "near_misses = []"), "near_misses must be a non-empty"),
        (('examples = ["you moron"]', 'examples = ["you moron"]\nnote = "x"'), "unknown keys"),
        (("[[rules]]", 'extra = ["x"]\n\n[[rules]]'), "[everyday] has unknown keys"),
    ],
)
def test_a_rule_without_examples_or_near_misses_is_refused(
    tmp_path: Path, change: tuple[str, str], problem: str
) -> None:
    """Every rule needs both lists; unknown keys are refused, naming the rule."""
    with pytest.raises(DataFileError) as raised:
        _parse(tmp_path, FILE.replace(*change))
    assert problem in raised.value.problem


def test_a_rule_listed_twice_is_refused(tmp_path: Path) -> None:
    """Two entries for one rule would hide which one the tests read."""
    twice = FILE + FILE[FILE.index("[[rules]]") :]
    with pytest.raises(DataFileError, match="appears twice"):
        _parse(tmp_path, twice)
