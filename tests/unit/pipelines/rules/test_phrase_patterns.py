"""The phrase data files (``pipelines/phrases/``): every pattern finds what its examples say,
named spans have one capture group each, and a malformed file is refused with a typed error."""

from __future__ import annotations

from pathlib import Path

import pytest
import re2

from pipelines.canonical import canonicalize
from pipelines.data_files import DataFileError, read_data_file
from pipelines.rules.phrase_patterns import PhrasePattern, phrase_file, read_phrase_file

_NAMED_GROUPS = {("mentions.toml", "named")}
_CASES = [
    (name, group, index, pattern)
    for name in ("mentions.toml", "reports.toml")
    for group, patterns in phrase_file(name).groups.items()
    for index, pattern in enumerate(patterns)
]
_EXAMPLE = "\nexamples = [{ text = 'a', finds = 'a' }]"
_PROVENANCE = '[provenance]\nsource = "s"\nlicence = "l"\npurpose = "p"\n'


@pytest.mark.parametrize(
    ("name", "group", "index", "pattern"),
    _CASES,
    ids=[f"{name}:{group}[{index}]" for name, group, index, _ in _CASES],
)
def test_each_pattern_finds_its_examples(
    name: str, group: str, index: int, pattern: PhrasePattern
) -> None:
    compiled = re2.compile(pattern.pattern)
    named = (name, group) in _NAMED_GROUPS
    assert compiled.groups == (1 if named else compiled.groups)
    for example in pattern.examples:
        found = compiled.search(canonicalize(example.text).text)
        assert found is not None, example.text
        assert found.group(1 if named else 0) == example.finds


def test_the_files_have_their_groups() -> None:
    assert list(phrase_file("mentions.toml").groups) == ["en_frames", "zh_frames", "named"]
    assert list(phrase_file("reports.toml").groups) == ["report_en", "report_zh"]
    assert "by hand" in phrase_file("mentions.toml").provenance.source


def _read(tmp_path: Path, body: str) -> None:
    path = tmp_path / "phrases.toml"
    path.write_text(body + "\n" + _PROVENANCE, encoding="utf-8")
    read_phrase_file(read_data_file(path))


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            "[[g]]\npattern = '''a${nope}'''" + _EXAMPLE,
            "no fragment",
        ),
        (
            "[fragments]\nx = 'b'\n[[g]]\npattern = 'a'" + _EXAMPLE,
            "fragments ['x'] are not used",
        ),
        ("[[g]]\npattern = 'a'", "needs examples"),
        ("[[g]]\npattern = '''(a)\\1'''" + _EXAMPLE, "not valid RE2"),
        ("[[g]]\npattern = 'a'\nexamples = [{ text = 'a' }]", "needs a text and what it finds"),
        ("[[g]]\npattern = 'a'\nwhy = 'x'" + _EXAMPLE, "unknown"),
        ("g = 3", "must be a non-empty array of tables"),
    ],
)
def test_a_malformed_phrase_file_is_refused(tmp_path: Path, body: str, problem: str) -> None:
    with pytest.raises(DataFileError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        _read(tmp_path, body)
