"""The emoji readings as data (``pipelines/phrases/emoji_han.toml``): its examples read as
written, and a malformed table is refused with a typed error."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from pipelines.canonical.emoji_words import EMOJI_HAN, read_emoji_table, read_emoji_words
from pipelines.data_files import DataFileError, read_data_file

_SHIPPED = resources.files("pipelines").joinpath("phrases", "emoji_han.toml")


def test_the_data_files_examples_read_as_written() -> None:
    data = read_data_file(_SHIPPED)
    assert read_emoji_table(data) == dict(EMOJI_HAN)
    assert data.body["examples"]
    for example in data.body["examples"]:
        assert read_emoji_words(example["text"]) == example["reads"]


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ('{ emoji = "a", reads = "猪" }', "must be an emoji"),
        ('{ emoji = "\\U0001F437", reads = "pig" }', "one Han character"),
        (
            '{ emoji = "\\U0001F437", reads = "猪" }, { emoji = "\\U0001F437", reads = "猪" }',
            "twice",
        ),
        ('{ emoji = "\\U0001F437", reads = "猪", colour = "pink" }', "unknown keys"),
    ],
)
def test_a_bad_emoji_table_is_refused(tmp_path: Path, entries: str, problem: str) -> None:
    path = tmp_path / "emoji.toml"
    path.write_text(
        f'emoji = [{entries}]\n[provenance]\nsource = "s"\nlicence = "l"\npurpose = "p"\n',
        encoding="utf-8",
    )
    with pytest.raises(DataFileError, match=problem):
        read_emoji_table(read_data_file(path))
