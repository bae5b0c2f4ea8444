"""Data files: TOML with a [provenance] table, read with errors that name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.data_files import DataFileError, read_data_file, strings

GOOD = """
words = ["a", "b"]

[provenance]
source = '''written by hand
  for this test'''
licence = "Apache-2.0"
purpose = "a test"
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "words.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_with_provenance_is_read_without_it_in_the_body(tmp_path: Path) -> None:
    """The provenance comes back typed (whitespace collapsed), the rest as the body."""
    data = read_data_file(_file(tmp_path, GOOD))
    assert data.name == "words.toml"
    assert data.provenance.source == "written by hand for this test"
    assert data.provenance.notes == ""
    assert dict(data.body) == {"words": ["a", "b"]}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('words = ["a"]\n', "'provenance' must be a table"),
        ('[provenance]\nsource = "x"\npurpose = "y"\n', "lacks ['licence']"),
        ('[provenance]\nsource = "x"\nlicence = "y"\npurpose = "z"\nby = "w"\n', "unknown keys"),
        ('[provenance]\nsource = " "\nlicence = "y"\npurpose = "z"\n', "'source' must be"),
        ("words = [\n", "is not valid TOML"),
    ],
)
def test_malformed_files_raise_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    """No provenance, a missing or unknown provenance key, or broken TOML: a typed error."""
    with pytest.raises(DataFileError) as raised:
        read_data_file(_file(tmp_path, text))
    assert raised.value.name == "words.toml"
    assert problem in raised.value.problem


def test_an_unreadable_file_is_a_data_file_error(tmp_path: Path) -> None:
    """A missing file is reported as a DataFileError, not a bare OSError."""
    with pytest.raises(DataFileError, match="cannot be read"):
        read_data_file(tmp_path / "missing.toml")


def test_strings_checks_arrays_of_strings() -> None:
    """Non-empty arrays of non-blank strings pass; empty items only where allowed."""
    assert strings("f", ["a", "b"], "k") == ("a", "b")
    assert strings("f", ["a", ""], "k", allow_empty=True) == ("a", "")
    for bad in ([], ["a", ""], ["a", 1], "a"):
        with pytest.raises(DataFileError, match="k must"):
            strings("f", bad, "k")
