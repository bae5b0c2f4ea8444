"""Strictness levels: ``off``, ``low``, ``medium``, ``high`` and ``maximum`` per category, as
thresholds of the policy.

The table is data, ``pipelines/policy_levels.toml``: per category (the model's: ``offensive``,
``hate``, ``spam``, ``advertisement``, and its harms: ``insult``, ``sexual_solicitation``,
``threat``, ``self_harm``, ``self_harm_incitement``), the ``PolicyThresholds`` fields each level
sets. Every flag and block field belongs to exactly one category; the escalation band
(``escalate_low``, ``escalate_high``) and ``model_clears_below`` belong to none (a policy file
sets them under ``[thresholds]``).

``medium`` is the shipped default of every category, so the default tenant is decided as
before. ``off`` sets the category's thresholds to 1.0, which never fires (``pipelines.policy``):
the model neither flags, blocks nor escalates that category; rule hits of the category keep the
actions their rules give them. A severe category (``pipelines.severe_harm``: a person should
see it) has no ``off``, and its flag threshold may not be set above its ``low`` one
(:meth:`StrictnessTable.ceiling`): the least a tenant can ask for is ``low``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from pipelines.data_files import DataFile, DataFileError, read_data_file, table
from pipelines.errors import PipelineError
from pipelines.policy import HARM_CATEGORIES, PolicyThresholds
from pipelines.severe_harm import is_severe

__all__ = [
    "LEVELS",
    "OFF",
    "SHIPPED_LEVELS",
    "LevelError",
    "StrictnessCategory",
    "StrictnessTable",
    "read_strictness_table",
]

OFF = "off"
LEVELS: tuple[str, ...] = (OFF, "low", "medium", "high", "maximum")
"""From the least strict to the strictest."""
DEFAULT_LEVEL = "medium"
_CATEGORY_KEYS = frozenset({"what", *LEVELS})
_BAND_FIELDS = frozenset({"escalate_low", "escalate_high", "model_clears_below"})


class LevelError(PipelineError):
    """A level or category a policy file names that is not one, or a level it may not have."""


@dataclass(frozen=True, slots=True)
class StrictnessCategory:
    """One category's levels: the thresholds each sets (``off`` absent for a severe one)."""

    name: str
    what: str
    severe: bool
    levels: Mapping[str, Mapping[str, float]]

    @property
    def fields(self) -> tuple[str, ...]:
        """The ``PolicyThresholds`` fields the category's levels set."""
        return tuple(self.levels[DEFAULT_LEVEL])


@dataclass(frozen=True, slots=True)
class StrictnessTable:
    """Every category's levels (``pipelines/policy_levels.toml``)."""

    categories: Mapping[str, StrictnessCategory]

    def thresholds(self, category: str, level: str) -> Mapping[str, float]:
        """The thresholds ``level`` of ``category`` sets; :class:`LevelError` when either is
        not one or the category cannot have that level (``off`` of a severe category)."""
        found = self.categories.get(category)
        if found is None:
            raise LevelError(
                f"{category!r} is not a category (known: {', '.join(self.categories)})"
            )
        if level not in LEVELS:
            raise LevelError(f"{category} = {level!r} is not a level (known: {', '.join(LEVELS)})")
        values = found.levels.get(level)
        if values is None:
            raise LevelError(
                f"{category} cannot be {level!r}: it is a severe category, a person sees it "
                f"(the least is {LEVELS[1]!r})"
            )
        return values

    def category_of(self, field: str) -> StrictnessCategory | None:
        """The category a threshold field belongs to (``None``: the escalation band)."""
        return next((c for c in self.categories.values() if field in c.fields), None)

    def ceiling(self, field: str) -> float | None:
        """The highest value ``field`` may take in a policy file: a severe category's flag
        threshold at its ``low`` level; ``None`` for every other field."""
        category = self.category_of(field)
        if category is None or not category.severe:
            return None
        return category.levels[LEVELS[1]][field]

    def level_of(self, thresholds: PolicyThresholds, category: str) -> str | None:
        """The level whose thresholds ``thresholds`` has for ``category`` (``None``: none)."""
        found = self.categories[category]
        for level, values in found.levels.items():
            if all(getattr(thresholds, name) == value for name, value in values.items()):
                return level
        return None


def read_strictness_table(data: DataFile) -> StrictnessTable:
    """The table in a parsed data file; :class:`DataFileError` for anything it cannot be: an
    unknown key, a level missing, fields that differ between a category's levels, a field of
    two categories or of none, a number out of [0, 1], levels out of order, an ``off`` on a
    severe category or none on another."""
    name = data.name
    body = table(name, data.body, "categories")
    categories: dict[str, StrictnessCategory] = {}
    for category, entry in body.items():
        where = f"categories.{category}"
        if not isinstance(entry, dict):
            raise DataFileError(name, f"{where} must be a table")
        unknown = set(entry) - _CATEGORY_KEYS
        if unknown:
            raise DataFileError(name, f"{where} has unknown keys {sorted(unknown)}")
        what = entry.get("what")
        if not isinstance(what, str) or not what.strip():
            raise DataFileError(name, f"{where}.what must be a non-empty string")
        severe = _severe(category)
        levels = {
            level: _level(name, f"{where}.{level}", entry[level])
            for level in LEVELS
            if level in entry
        }
        missing = [level for level in LEVELS[1:] if level not in levels]
        if missing:
            raise DataFileError(name, f"{where} lacks the levels {missing}")
        if severe == (OFF in levels):
            problem = "a severe category has no 'off'" if severe else "lacks the level 'off'"
            raise DataFileError(name, f"{where}: {problem}")
        _check_levels(name, where, levels)
        categories[category] = StrictnessCategory(
            category, " ".join(what.split()), severe, MappingProxyType(levels)
        )
    _check_fields(name, categories)
    return StrictnessTable(MappingProxyType(categories))


def _severe(category: str) -> bool:
    """A harm category is severe when the category it flags under is (``threat`` ...)."""
    return is_severe(HARM_CATEGORIES.get(category, category))


def _level(name: str, where: str, value: object) -> Mapping[str, float]:
    if not isinstance(value, dict) or not value:
        raise DataFileError(name, f"{where} must be a non-empty table of thresholds")
    out: dict[str, float] = {}
    for field, number in value.items():
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not 0.0 <= number <= 1.0
        ):
            raise DataFileError(name, f"{where}.{field} must be a number in [0, 1]")
        out[field] = float(number)
    return MappingProxyType(out)


def _check_levels(name: str, where: str, levels: Mapping[str, Mapping[str, float]]) -> None:
    """The same fields at every level, each no lower at a less strict level."""
    ordered = [level for level in LEVELS if level in levels]
    fields = set(levels[ordered[0]])
    for level in ordered[1:]:
        if set(levels[level]) != fields:
            raise DataFileError(name, f"{where}.{level} sets other fields than {ordered[0]}")
    for looser, stricter in itertools.pairwise(ordered):
        for field in sorted(fields):
            if levels[looser][field] < levels[stricter][field]:
                raise DataFileError(
                    name, f"{where}: {field} at {looser!r} is below {stricter!r}: out of order"
                )


def _check_fields(name: str, categories: Mapping[str, StrictnessCategory]) -> None:
    """Every flag and block field of ``PolicyThresholds`` in exactly one category."""
    known = {f.name for f in dataclasses.fields(PolicyThresholds)} - _BAND_FIELDS
    seen: dict[str, str] = {}
    for category in categories.values():
        for field in category.fields:
            if field not in known:
                raise DataFileError(
                    name, f"categories.{category.name}: {field!r} is not a flag or block threshold"
                )
            if field in seen:
                raise DataFileError(name, f"{field} is in both {seen[field]} and {category.name}")
            seen[field] = category.name
    missing = sorted(known - set(seen))
    if missing:
        raise DataFileError(name, f"no category sets {missing}")


SHIPPED_LEVELS = read_strictness_table(
    read_data_file(resources.files("pipelines").joinpath("policy_levels.toml"))
)
"""The shipped table (``pipelines/policy_levels.toml``)."""
