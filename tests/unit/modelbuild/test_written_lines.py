"""The written line sets: every shipped file loads with its provenance, and malformed ones fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelbuild.written_lines import (
    WRITTEN_FILES,
    parse_written_file,
    written_file,
    written_lines,
)
from pipelines.data_files import DataFileError, read_data_file

PROVENANCE = '[provenance]\nsource = "by hand"\nlicence = "Apache-2.0"\npurpose = "test"\n'
SETS = """
[[sets]]
lang = "en"
topic = "greeting"
label = "benign"
lines = ["hello  there", "see you tomorrow"]

[[sets]]
lang = "zh"
topic = "greeting"
label = "benign"
lines = ["早上好"]
"""


def _parse(tmp_path: Path, body: str) -> object:
    path = tmp_path / "written.toml"
    path.write_text(PROVENANCE + body, encoding="utf-8")
    return parse_written_file(read_data_file(path))


def test_every_written_file_loads_with_its_provenance_and_both_kinds_of_label() -> None:
    """Each shipped file says who wrote it and why; the everyday files hold only benign lines,
    the harmful files every harmful label and no benign one, the pair and round files both
    kinds."""
    for name in WRITTEN_FILES:
        found = written_file(name)
        assert "written" in found.provenance.source.lower()
        assert found.provenance.purpose
        labels = {line.label for line in found.lines}
        langs = {line.lang for line in found.lines}
        assert langs == {name.split("_")[0]}
        if name.endswith("_everyday"):
            assert labels == {"benign"}
        elif name.endswith("_harmful"):
            assert labels == {"offensive", "hate", "spam", "advertisement"}
        elif name.endswith("_round4"):  # hate and belittling beside talk of the same groups
            assert labels == {"benign", "offensive", "hate"}
        elif name.endswith("_round5"):  # everyday chat beside harm in ordinary words
            assert {"benign", "offensive"} <= labels <= {"benign", "offensive", "hate"}
        elif any(f"_round{n}" in name for n in (6, 7, 8, 9)):  # everyday chat beside solicitation,
            # self-harm, spam, harassment, threats in ordinary words
            assert "benign" in labels
            assert labels <= {"benign", "offensive", "spam", "advertisement"}
        else:  # contrastive pairs: harm in ordinary words beside benign lines on its topics
            assert labels == {"benign", "offensive", "spam"}
    assert len(written_lines()) == sum(len(written_file(n).lines) for n in WRITTEN_FILES)


def test_lines_keep_file_order_with_whitespace_collapsed(tmp_path: Path) -> None:
    found = _parse(tmp_path, SETS)
    assert [(line.text, line.lang, line.topic) for line in found.lines] == [  # type: ignore[attr-defined]
        ("hello there", "en", "greeting"),
        ("see you tomorrow", "en", "greeting"),
        ("早上好", "zh", "greeting"),
    ]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (SETS.replace('label = "benign"', 'label = "rude"', 1), "label must be one of"),
        (SETS.replace('lang = "zh"', 'lang = "fr"'), "lang must be one of"),
        (
            SETS.replace(
                'topic = "greeting"\nlabel = "benign"\nlines = ["早',
                'topic = "greeting"\nlabel = "benign"\nnote = 1\nlines = ["早',
            ),
            "unknown keys",
        ),
        (SETS.replace('"早上好"', '"see you  tomorrow"'), "appears twice"),
        (SETS.replace('lang = "zh"', 'lang = "en"'), "appears twice"),
        (SETS.replace('lines = ["早上好"]', "lines = []"), "non-empty array"),
        ("", "needs [[sets]]"),
        ("[other]\nx = 1\n" + SETS, "needs [[sets]]"),
    ],
)
def test_malformed_files_are_refused_with_the_reason(
    tmp_path: Path, body: str, problem: str
) -> None:
    with pytest.raises(DataFileError, match=problem.replace("[", r"\[")):
        _parse(tmp_path, body)


def test_an_unknown_file_name_is_refused() -> None:
    with pytest.raises(KeyError, match="not a written-line file"):
        written_file("probe_l")
