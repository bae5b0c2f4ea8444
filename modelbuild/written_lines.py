"""Written line sets: whole chat lines written for training, not expanded from templates.

``modelbuild/data/training/written/*.toml`` hold lines as a person types them in a chat, each
set with its language, topic and label (:data:`modelbuild.training_data.LABELS`)::

    [provenance]                   # as every data file (pipelines.data_files)
    ...

    [[sets]]
    lang = "en"                    # en | zh
    topic = "plain_chat"           # unique per language within the file
    label = "benign"               # benign | offensive | hate | spam | advertisement
    lines = ["anyone up for a match later", ...]

Template families (:mod:`modelbuild.template_families`) give many lines of a few shapes; these
give one line per shape, the variety templates lack (plain everyday chat, reports of received
abuse in the reporter's own words, harmful lines of the categories the model missed). Every
line is used, in file order. A line may appear only once across all written files: a line in
two sets (or twice with different labels) is an error, not a weight.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from modelbuild.template_families import TemplateLine
from modelbuild.training_data import LABELS
from pipelines.data_files import (
    DataFile,
    DataFileError,
    Provenance,
    keyed_table,
    read_data_file,
    strings,
)

__all__ = ["WRITTEN_FILES", "WrittenFile", "parse_written_file", "written_file", "written_lines"]

WRITTEN_FILES = (
    "en_everyday",
    "zh_everyday",
    "en_harmful",
    "zh_harmful",
    "en_pairs",
    "zh_pairs",
    "en_round3",
    "zh_round3",
    "en_round4",
    "zh_round4",
    "en_round5",
    "zh_round5",
    "en_round6_a",
    "en_round6_b",
    "zh_round6",
    "en_round6_c",
    "zh_round6_b",
    "en_round7",
    "zh_round7",
    "en_round7_b",
    "en_round8",
    "zh_round8",
    "en_round9",
    "zh_round9",
)
"""The written-line files, by name (``written/<name>.toml``): everyday chat, harmful lines per
category, contrastive pairs (harm in ordinary words beside benign lines on its topics), and a
third round of contrastive sets (everyday lines the heads flagged as a class beside harm in
ordinary words), a fourth (hate and belittling in ordinary words beside neutral talk about
the same identities) and a fifth (short check-ins, low moods, friendly competition and
moderation talk beside harassment, threats, self-harm and sexual harassment in ordinary
words) and a sixth (encouragement, care, money and work news, community and filter talk, scam
warnings, health, hobbies, dating and safe talk about self-harm beside sexual solicitation,
self-harm, casual scams and ads; 日常词辱骂, 性内容 and reports quoting abuse in Chinese;
then, after probe P's end grading, harassment in ordinary words and Chinese game slang) and an
eighth (ordinary senses, idioms, teasing, reports of scams and of abuse words, swearing at
oneself beside sexual solicitation, self-harm, threats in ordinary words, scams and ads;
Chinese insults, self-harm and sexual content beside hyperbole, ordinary senses, reports and
game talk) and a ninth (harassment and insults without swear words, threats in plain words,
self-harm intent in indirect words, urging, sexual offers, beside money and link talk, reports
and worried friends, game banter and short game lines, hyperbole and ordinary senses)."""
_LANGS = ("en", "zh")
_SET_KEYS = frozenset({"lang", "topic", "label", "lines"})


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """One written-line file: its provenance and its lines in file order."""

    name: str
    provenance: Provenance
    lines: tuple[TemplateLine, ...]


def _resource(name: str) -> Traversable:
    return resources.files("modelbuild").joinpath("data", "training", "written", f"{name}.toml")


def _set_lines(file: str, raw: object, position: int) -> list[TemplateLine]:
    where = f"sets[{position}]"
    raw = keyed_table(file, raw, where, _SET_KEYS)
    lang, topic, label = raw.get("lang"), raw.get("topic"), raw.get("label")
    if lang not in _LANGS:
        raise DataFileError(file, f"{where}.lang must be one of {list(_LANGS)}")
    if not isinstance(topic, str) or not topic:
        raise DataFileError(file, f"{where}.topic must be a non-empty string")
    if label not in LABELS:
        raise DataFileError(file, f"set {lang}/{topic}: label must be one of {list(LABELS)}")
    texts = strings(file, raw.get("lines"), f"set {lang}/{topic}.lines")
    return [TemplateLine(" ".join(t.split()), str(lang), topic, str(label)) for t in texts]


def parse_written_file(data: DataFile) -> WrittenFile:
    """A read written-line file, checked: known keys, languages and labels, a topic once per
    language, every line once."""
    raw_sets = data.body.get("sets")
    if set(data.body) != {"sets"} or not isinstance(raw_sets, list) or not raw_sets:
        raise DataFileError(data.name, "needs [[sets]] tables and nothing else")
    lines: list[TemplateLine] = []
    topics: set[tuple[str, str]] = set()
    for i, raw in enumerate(raw_sets):
        found = _set_lines(data.name, raw, i)
        key = (found[0].lang, found[0].topic)
        if key in topics:
            raise DataFileError(data.name, f"set {key[0]}/{key[1]} appears twice")
        topics.add(key)
        lines += found
    _check_once(data.name, lines)
    return WrittenFile(data.name, data.provenance, tuple(lines))


def _check_once(file: str, lines: list[TemplateLine]) -> None:
    seen: dict[str, TemplateLine] = {}
    for line in lines:
        first = seen.setdefault(line.text, line)
        if first is not line:
            raise DataFileError(
                file,
                f"line {line.text!r} appears twice ({first.lang}/{first.topic} and "
                f"{line.lang}/{line.topic})",
            )


@functools.cache
def written_file(name: str) -> WrittenFile:
    """The written-line file ``written/<name>.toml``, one of :data:`WRITTEN_FILES`."""
    if name not in WRITTEN_FILES:
        raise KeyError(f"{name!r} is not a written-line file; they are {list(WRITTEN_FILES)}")
    return parse_written_file(read_data_file(_resource(name)))


@functools.cache
def written_lines() -> tuple[TemplateLine, ...]:
    """Every written line of every file, in :data:`WRITTEN_FILES` order; a line written in two
    files is an error."""
    out = [line for name in WRITTEN_FILES for line in written_file(name).lines]
    _check_once("written/*.toml", out)
    return tuple(out)
