"""Labels for the model's harm outputs, from the topics the written and template lines carry.

``modelbuild/data/training/harm_topics.toml`` says which topics teach which harm
(:data:`pipelines.scores.HARM_LABELS` order). A line's label vector holds 1 (the harm), 0 (not
this harm) or :data:`UNKNOWN` (the topic mixes this harm with others: neither taught nor denied).
Benign lines are 0 for every harm, so written lines stand on both sides of every harm and the
model cannot learn "written" as "harmful".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from modelbuild.training_data import template_lines
from modelbuild.written_lines import written_lines
from pipelines.data_files import DataFileError, read_data_file, strings, table

__all__ = [
    "HARMS",
    "UNKNOWN",
    "HarmLine",
    "HarmTopics",
    "harm_lines",
    "harm_topics",
    "label_vector",
]

HARMS: tuple[str, ...] = (
    "insult",
    "threat",
    "self_harm",
    "self_harm_incitement",
    "sexual_solicitation",
)
"""The harm outputs, in the model's output order."""
UNKNOWN = -1.0
_TEMPLATE_FILES = ("threats", "abuse")
_FILE = "harm_topics.toml"


@dataclass(frozen=True, slots=True)
class HarmTopics:
    """Per harm: the topics that are it, and the topics that mix it with others."""

    positive: dict[str, frozenset[str]]
    mixed: dict[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class HarmLine:
    """A written or template line with its harm labels."""

    text: str
    lang: str
    topic: str
    labels: tuple[float, ...]


@functools.cache
def harm_topics() -> HarmTopics:
    """The topic table, checked: every harm named, no topic both positive and mixed."""
    data = read_data_file(resources.files("modelbuild") / "data" / "training" / _FILE)
    parts: dict[str, dict[str, frozenset[str]]] = {}
    for part in ("positive", "mixed"):
        section = table(_FILE, data.body, part)
        unknown = set(section) - set(HARMS)
        if unknown:
            raise DataFileError(_FILE, f"[{part}] names unknown harms {sorted(unknown)}")
        parts[part] = {
            harm: frozenset(strings(_FILE, section.get(harm), f"{part}.{harm}")) for harm in HARMS
        }
    for harm in HARMS:
        both = parts["positive"][harm] & parts["mixed"][harm]
        if both:
            raise DataFileError(_FILE, f"{harm}: topics both positive and mixed: {sorted(both)}")
    return HarmTopics(parts["positive"], parts["mixed"])


def label_vector(topic: str, benign: bool, topics: HarmTopics | None = None) -> tuple[float, ...]:
    """The harm labels of a line of ``topic`` (all 0 for a benign line)."""
    if benign:
        return tuple(0.0 for _ in HARMS)
    table_ = topics or harm_topics()
    out = []
    for harm in HARMS:
        if topic in table_.positive[harm]:
            out.append(1.0)
        elif topic in table_.mixed[harm]:
            out.append(UNKNOWN)
        else:
            out.append(0.0)
    return tuple(out)


def harm_lines(seed: int) -> list[HarmLine]:
    """Every written line and every threat and abuse template line, labelled."""
    out = [
        HarmLine(line.text, line.lang, line.topic, label_vector(line.topic, line.label == "benign"))
        for line in written_lines()
    ]
    for name in _TEMPLATE_FILES:
        for line in template_lines(name, seed):
            topic = f"{name}:{line.topic}"
            out.append(
                HarmLine(line.text, line.lang, topic, label_vector(topic, line.label == "benign"))
            )
    return out
