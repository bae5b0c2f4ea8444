"""Template families: hand-written templates with ``{slot}`` fields and the values of each slot,
expanded into distinct sentences by a seeded generator (templates x slot values).

Used by :mod:`modelbuild.hard_negatives` (benign lines) and :mod:`modelbuild.threats` (threats
and self-harm incitement). A family's generator is seeded with ``seed``, its language and its
topic, so one family's lines do not depend on the others.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Family", "TemplateLine", "family_lines", "lines_of"]


@dataclass(frozen=True, slots=True)
class Family:
    """One topic's templates and the values of their slots."""

    lang: str
    topic: str
    templates: tuple[str, ...]
    slots: dict[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class TemplateLine:
    """One generated line and the family (language, topic) it came from."""

    text: str
    lang: str
    topic: str


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def family_lines(family: Family, seed: int, per_family: int) -> list[str]:
    """Up to ``per_family`` distinct lines of ``family`` (fewer when the templates and values
    cannot make that many), whitespace collapsed."""
    rng = random.Random(f"{seed}:{family.lang}:{family.topic}")
    seen: set[str] = set()
    out: list[str] = []
    for _ in range(per_family * 8):
        template = rng.choice(family.templates)
        values = {name: rng.choice(family.slots[name]) for name in _fields(template)}
        line = " ".join(template.format(**values).split())
        if line not in seen:
            seen.add(line)
            out.append(line)
            if len(out) == per_family:
                break
    return out


def lines_of(families: Sequence[Family], seed: int, per_family: int) -> list[TemplateLine]:
    """Up to ``per_family`` distinct lines of each family, in family order, tagged with the
    family's language and topic (the same seed, the same lines)."""
    return [
        TemplateLine(text, family.lang, family.topic)
        for family in families
        for text in family_lines(family, seed, per_family)
    ]
