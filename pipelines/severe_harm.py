"""The severe harm categories: their names, how urgent their review is, what the policy owes them.

Rule hits in these categories always go to a person, whatever the hit's action. Their review
priority has a floor, and the categories where someone may be in danger right now come first in
the review queue (``review/queue.py``). The table is data,
``pipelines/rulesets/severe_categories.toml``, with what each category is and examples; the
shipped one is:

================================  ====================================================  ======
category                          what                                                  floor
================================  ====================================================  ======
``self_harm``                     the writer's own intent; never blocked, urgent        1.0
``sexual_exploitation_minors``    sexual content or solicitation involving a minor;     1.0
                                  urgent
``threat``                        violence against a person or their family             0.85
``sexual_exploitation``           sexual extortion (sextortion) and grooming cues       0.85
``self_harm_incitement``          telling someone else to hurt or kill themselves       0.8
================================  ====================================================  ======

A rule layer may add a category of its own (``[severe.<name>]``, ``pipelines.rules.layers``):
its stack's table (:meth:`SevereTable.with_categories`) travels with its engine's outcomes
(``RuleOutcome.severe``), so the policy gives its hits the same treatment. The names below are
the shipped categories the model's harm outputs map to; they must stay in the data file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from pipelines.data_files import DataFile, DataFileError, keyed_table, read_data_file, strings

__all__ = [
    "NEVER_BLOCKED",
    "REVIEW_PRIORITY_FLOOR",
    "SELF_HARM",
    "SELF_HARM_INCITEMENT",
    "SEVERE_CATEGORIES",
    "SEXUAL_EXPLOITATION",
    "SEXUAL_EXPLOITATION_MINORS",
    "SHIPPED",
    "THREAT",
    "URGENT_CATEGORIES",
    "SevereCategory",
    "SevereTable",
    "is_severe",
    "read_severe_table",
    "severe_category",
]

THREAT = "threat"
SELF_HARM = "self_harm"
SELF_HARM_INCITEMENT = "self_harm_incitement"
SEXUAL_EXPLOITATION = "sexual_exploitation"
SEXUAL_EXPLOITATION_MINORS = "sexual_exploitation_minors"
_NAMED = (THREAT, SELF_HARM, SELF_HARM_INCITEMENT, SEXUAL_EXPLOITATION, SEXUAL_EXPLOITATION_MINORS)
_CATEGORY_KEYS = frozenset({"name", "what", "floor", "urgent", "never_blocked", "examples"})


@dataclass(frozen=True, slots=True)
class SevereCategory:
    """One severe category and what its hits are owed."""

    name: str
    floor: float
    """The least review priority an escalation with a hit in it gets, in (0, 1]."""
    urgent: bool = False
    """Reviewed before everything else in the queue."""
    never_blocked: bool = False
    """A hit here caps a model-driven block at flag (a block rule of another category still
    blocks)."""


@dataclass(frozen=True, slots=True)
class SevereTable:
    """The severe categories, most urgent first; immutable, compared by value."""

    categories: tuple[SevereCategory, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.categories)

    @property
    def urgent(self) -> frozenset[str]:
        return frozenset(c.name for c in self.categories if c.urgent)

    @property
    def never_blocked(self) -> frozenset[str]:
        return frozenset(c.name for c in self.categories if c.never_blocked)

    def is_severe(self, category: str) -> bool:
        return any(c.name == category for c in self.categories)

    def floor(self, category: str) -> float:
        """The category's priority floor; 0 for a category that is not severe."""
        return next((c.floor for c in self.categories if c.name == category), 0.0)

    def with_categories(self, added: Iterable[SevereCategory]) -> SevereTable:
        """This table and ``added`` after it (a layer's own categories)."""
        return SevereTable((*self.categories, *added))


def severe_category(
    name: str, raw: object, where: str, keys: frozenset[str] = _CATEGORY_KEYS
) -> SevereCategory:
    """One category's table checked: ``floor`` a number in (0, 1], ``urgent`` and
    ``never_blocked`` booleans (default false); :class:`DataFileError` otherwise."""
    entry = keyed_table(name, raw, where, keys)
    floor = entry.get("floor")
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 < floor <= 1:
        raise DataFileError(name, f"{where}.floor must be a number in (0, 1]")
    flags = {key: entry.get(key, False) for key in ("urgent", "never_blocked")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise DataFileError(name, f"{where}.{key} must be true or false")
    category = entry.get("name", where.rpartition(".")[2])
    return SevereCategory(str(category), float(floor), flags["urgent"], flags["never_blocked"])


def read_severe_table(data: DataFile) -> SevereTable:
    """The table of a read ``severe_categories.toml``; every shipped name must be there."""
    raw = data.body.get("categories")
    if not isinstance(raw, list) or not raw:
        raise DataFileError(data.name, "'categories' must be a non-empty array of tables")
    categories = []
    for position, entry in enumerate(raw):
        where = f"categories[{position}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise DataFileError(data.name, f"{where} must be a table with a 'name'")
        strings(data.name, entry.get("examples"), f"{where}.examples")
        categories.append(severe_category(data.name, entry, where))
    table = SevereTable(tuple(categories))
    if len(set(table.names)) != len(table.names):
        raise DataFileError(data.name, "a category is listed twice")
    missing = [name for name in _NAMED if name not in table.names]
    if missing:
        raise DataFileError(data.name, f"lacks the categories {missing} the policy names")
    return table


SHIPPED = read_severe_table(
    read_data_file(resources.files("pipelines").joinpath("rulesets", "severe_categories.toml"))
)
"""The shipped table: every stack's, unless a layer adds categories."""

SEVERE_CATEGORIES: tuple[str, ...] = SHIPPED.names
"""Most urgent first."""

URGENT_CATEGORIES: frozenset[str] = SHIPPED.urgent
"""Reviewed before everything else in the queue, whatever the rank of other items."""

NEVER_BLOCKED: frozenset[str] = SHIPPED.never_blocked
"""A hit here caps a model-driven block at flag (a block rule of another category still blocks)."""

REVIEW_PRIORITY_FLOOR: MappingProxyType[str, float] = MappingProxyType(
    {c.name: c.floor for c in SHIPPED.categories}
)
"""The least review priority an escalation with a hit in the category gets."""


def is_severe(category: str) -> bool:
    """True for the shipped severe categories (their hits always escalate)."""
    return SHIPPED.is_severe(category)
