"""Template families: hand-written templates with ``{slot}`` fields and the values of each slot,
expanded into distinct sentences by a seeded generator (templates x slot values).

The families themselves are data (``modelbuild/data/training/*.toml``, read by
:mod:`modelbuild.training_data`); this module is the expansion. A family's generator is seeded
with ``seed``, its language and its topic, so one family's lines do not depend on the others.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Family", "TemplateLine", "family_lines", "fields", "lines_of"]


@dataclass(frozen=True, slots=True)
class Family:
    """One topic's templates and the values of their slots; ``label`` says what its lines are
    (``benign``, ``offensive``, ``hate``, ``spam``, ...)."""

    lang: str
    topic: str
    templates: tuple[str, ...]
    slots: Mapping[str, tuple[str, ...]]
    label: str


@dataclass(frozen=True, slots=True)
class TemplateLine:
    """One generated line and the family (language, topic, label) it came from."""

    text: str
    lang: str
    topic: str
    label: str


def fields(template: str) -> list[str]:
    """The slot names of ``template`` in order (``ValueError`` for unbalanced braces)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def family_lines(family: Family, seed: int, per_family: int) -> list[str]:
    """Up to ``per_family`` distinct lines of ``family`` (fewer when the templates and values
    cannot make that many), whitespace collapsed."""
    rng = random.Random(f"{seed}:{family.lang}:{family.topic}")
    seen: set[str] = set()
    out: list[str] = []
    for _ in range(per_family * 8):
        template = rng.choice(family.templates)
        values = {name: rng.choice(family.slots[name]) for name in fields(template)}
        line = " ".join(template.format(**values).split())
        if line not in seen:
            seen.add(line)
            out.append(line)
            if len(out) == per_family:
                break
    return out


def lines_of(families: Sequence[Family], seed: int, per_family: int) -> list[TemplateLine]:
    """Up to ``per_family`` distinct lines of each family, in family order, tagged with the
    family's language, topic and label (the same seed, the same lines)."""
    return [
        TemplateLine(text, family.lang, family.topic, family.label)
        for family in families
        for text in family_lines(family, seed, per_family)
    ]
