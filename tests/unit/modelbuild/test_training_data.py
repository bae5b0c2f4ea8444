"""The training data files: every one loads with its provenance, and malformed families fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelbuild.template_families import fields
from modelbuild.training_data import (
    FAMILY_FILES,
    family_file,
    insult_words,
    lexicon_templates,
    parse_family_file,
    template_lines,
    word_lists,
)
from pipelines.data_files import DataFileError, read_data_file

PROVENANCE = '[provenance]\nsource = "by hand"\nlicence = "Apache-2.0"\npurpose = "test"\n'
FAMILY = """
lines_per_family = 5
label = "benign"

[[families]]
lang = "en"
topic = "greeting"
templates = ["hello {who}", "hi {who}, {end}"]

[families.slots]
who = ["there", "all"]
end = { lists = ["ends"] }
"""
LISTS = {"ends": ("bye", "see you")}


def test_every_family_file_loads_with_its_provenance_and_labels() -> None:
    """Each shipped family file says where its lines come from; labels are what the build
    expects of it (threats offensive, hard negatives and twins benign, abuse both kinds)."""
    labels = {}
    for name in FAMILY_FILES:
        found = family_file(name)
        assert "by hand" in found.provenance.source
        assert found.provenance.purpose
        labels[name] = {f.label for f in found.families}
    assert labels["threats"] == {"offensive"}
    assert labels["abuse"] == {"offensive", "hate"}
    assert labels["spam"] == {"spam"}
    assert labels["hard_negatives"] == labels["counterfactuals"] == {"benign"}
    assert lexicon_templates().provenance.licence
    assert set(insult_words()) == {"en", "zh"}
    assert "idiot" in insult_words()["en"]
    assert {"en_groups", "zh_groups"} <= set(word_lists())


def test_lines_per_family_is_the_files_default() -> None:
    """Without ``per_family`` each family gives at most the file's ``lines_per_family``."""
    found = family_file("threats")
    lines = template_lines("threats", 7)
    per_topic: dict[tuple[str, str], int] = {}
    for line in lines:
        per_topic[(line.lang, line.topic)] = per_topic.get((line.lang, line.topic), 0) + 1
    assert max(per_topic.values()) == found.lines_per_family
    assert len(template_lines("threats", 7, per_family=3)) == 3 * len(found.families)


def test_lexicon_templates_use_only_their_fields() -> None:
    """Insult frames take a word, hate frames a word and a group; groups and products are
    plain words."""
    templates = lexicon_templates()
    assert {f for t in templates.insult["en"] for f in fields(t)} <= {"w", "n"}
    assert {f for t in templates.hate["zh"] for f in fields(t)} == {"w", "g"}
    assert not [w for w in templates.hate_groups["en"] if fields(w)]


def test_a_well_formed_family_expands_lists_and_labels(tmp_path: Path) -> None:
    """Named lists fill a slot; the file's label applies to a family that names none."""
    found = parse_family_file(read_data_file(_write(tmp_path, FAMILY + "\n" + PROVENANCE)), LISTS)
    (family,) = found.families
    assert family.slots["end"] == ("bye", "see you")
    assert family.label == "benign"
    assert found.lines_per_family == 5


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "family.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("who = [", "whom = ["), "templates use slots without values ['who']"),
        (('end = { lists = ["ends"] }', 'end = ["x"]\nextra = ["y"]'), "slots no template uses"),
        (('["ends"]', '["missing"]'), "names 'missing', not in word_lists.toml"),
        (('label = "benign"', 'label = "rude"'), "label must be one of"),
        (("lines_per_family = 5", "lines_per_family = 0"), "lines_per_family must be"),
        (('topic = "greeting"', 'topic = "greeting"\ncolour = "red"'), "unknown keys ['colour']"),
        (('"hello {who}"', '"hello {who"'), "is malformed"),
    ],
)
def test_malformed_families_raise(tmp_path: Path, change: tuple[str, str], problem: str) -> None:
    """A slot without values, an unused slot, an unknown list, label or key, a bad count or a
    broken template: a DataFileError that names the family file."""
    text = FAMILY.replace(*change)
    with pytest.raises(DataFileError) as raised:
        parse_family_file(read_data_file(_write(tmp_path, text + "\n" + PROVENANCE)), LISTS)
    assert raised.value.name == "family.toml"
    assert problem in raised.value.problem


def test_a_language_and_topic_appear_once_per_file(tmp_path: Path) -> None:
    """Two families with one language and topic would share their generator's seed."""
    text = FAMILY + FAMILY.split('lines_per_family = 5\nlabel = "benign"\n')[1]
    with pytest.raises(DataFileError, match="repeat"):
        parse_family_file(read_data_file(_write(tmp_path, text + "\n" + PROVENANCE)), LISTS)
