"""The policy file: strictness levels and thresholds of ``PolicyThresholds`` in TOML, read and
written in one place.

The worker and the online service load it at start and reload it when it changes
(``policy_file.path``, ``engine.policy_watch``; a tenant's in ``policy_file.tenants_dir``,
``engine.tenant_policy_watch``); ``modstream policy calibrate`` writes one. The file holds up to
two tables: ``[levels]``, a strictness level per category (``pipelines.policy_levels``:
``off``, ``low``, ``medium``, ``high``, ``maximum``), and ``[thresholds]``, whose keys are
``PolicyThresholds`` field names (the per-category flag and block thresholds, the escalation
band). A threshold set under ``[thresholds]`` wins over the one its category's level gives; a
key neither table sets keeps the value the service was configured with
(``MODSTREAM_POLICY__*`` or the defaults)::

    [levels]
    offensive = "low"
    spam = "high"

    [thresholds]
    flag_offensive = 0.75   # explicit: wins over low's 0.8, low's block 0.98 stays

Anything else is refused with :class:`PolicyFileError` naming the problem: TOML that does not
parse, another table, neither table, an unknown category or level (a typo must not be silently
ignored), ``off`` for a severe category or a severe flag threshold above its ``low`` level's, an
unknown threshold key, a value that is not a number, or thresholds that cannot work together
(``PolicyThresholds``' own checks: each in [0, 1], a flag threshold not above its block
threshold, ``escalate_low < escalate_high``), checked on what the levels and the thresholds give
together.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.errors import PipelineError
from pipelines.policy import PolicyConfigError, PolicyThresholds
from pipelines.policy_levels import SHIPPED_LEVELS, LevelError, StrictnessTable

__all__ = [
    "THRESHOLD_FIELDS",
    "CategoryLine",
    "PolicyDocument",
    "PolicyFileError",
    "category_lines",
    "load_policy_file",
    "parse_policy",
    "policy_values",
    "read_policy",
    "read_policy_file",
    "render_policy",
    "resolve_policy",
]

THRESHOLD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PolicyThresholds))
"""The keys a ``[thresholds]`` table may hold, in ``PolicyThresholds``' order."""

_TABLE = "thresholds"
_LEVELS = "levels"


class PolicyFileError(PipelineError):
    """A policy file that cannot be used (the message says why; the running policy stays)."""


@dataclass(frozen=True, slots=True)
class PolicyDocument:
    """What a policy file says, before it is read over the configured thresholds."""

    levels: Mapping[str, str] = field(default_factory=dict)
    """Category -> level, in the file's order (``[levels]``)."""
    values: Mapping[str, float] = field(default_factory=dict)
    """Threshold field -> number (``[thresholds]``): explicit, they win over the levels."""


def parse_policy(
    text: str, base: PolicyThresholds, table: StrictnessTable = SHIPPED_LEVELS
) -> PolicyThresholds:
    """The thresholds of a policy file's ``text``, over ``base`` for the keys it leaves out."""
    return resolve_policy(read_policy(text), base, table)


def resolve_policy(
    document: PolicyDocument, base: PolicyThresholds, table: StrictnessTable = SHIPPED_LEVELS
) -> PolicyThresholds:
    """``base`` with ``document``'s levels' thresholds, then its explicit ones, over it; each
    value within its severe ceiling and the whole checked by ``PolicyThresholds``."""
    chosen: dict[str, float] = {}
    for category, level in document.levels.items():
        try:
            chosen.update(table.thresholds(category, level))
        except LevelError as exc:
            raise PolicyFileError(f"[{_LEVELS}] {exc}") from exc
    for name, value in document.values.items():
        ceiling = table.ceiling(name)
        if ceiling is not None and value > ceiling:
            raise PolicyFileError(
                f"[{_TABLE}] {name} = {value:g} is above {ceiling:g}, the least strict a severe "
                "category may be (its 'low' level): a person must see it"
            )
        chosen[name] = value
    try:
        return dataclasses.replace(base, **chosen)
    except PolicyConfigError as exc:
        where = f"[{_LEVELS}] and [{_TABLE}]" if document.levels else f"[{_TABLE}]"
        raise PolicyFileError(f"{where} {exc}") from exc


def policy_values(text: str) -> dict[str, float]:
    """The explicit thresholds a policy file's ``text`` sets (``[thresholds]``), checked one by
    one (not yet against each other: that needs the thresholds they are read over, see
    :func:`parse_policy`)."""
    return dict(read_policy(text).values)


def read_policy(text: str) -> PolicyDocument:
    """The levels and thresholds a policy file's ``text`` names, each checked on its own: a
    level must be a string, a threshold a known key with a number."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"not TOML: {exc}") from exc
    extra = sorted(set(document) - {_TABLE, _LEVELS})
    if extra:
        raise PolicyFileError(
            f"unknown table or key {extra[0]!r}: only [{_LEVELS}] and [{_TABLE}] are read"
        )
    if not document:
        raise PolicyFileError(f"no [{_LEVELS}] or [{_TABLE}] table")
    return PolicyDocument(
        levels=_levels(document.get(_LEVELS, {})), values=_values(document.get(_TABLE, {}))
    )


def _levels(table: object) -> dict[str, str]:
    if not isinstance(table, dict):
        raise PolicyFileError(f'[{_LEVELS}] must be a table of category = "level"')
    levels: dict[str, str] = {}
    for category, level in table.items():
        if not isinstance(level, str):
            raise PolicyFileError(f"[{_LEVELS}] {category} must be a level name (a string)")
        levels[category] = level
    return levels


def _values(table: object) -> dict[str, float]:
    if not isinstance(table, dict):
        raise PolicyFileError(f"[{_TABLE}] must be a table")
    unknown = sorted(set(table) - set(THRESHOLD_FIELDS))
    if unknown:
        raise PolicyFileError(
            f"[{_TABLE}] {unknown[0]!r} is not a threshold (known: {', '.join(THRESHOLD_FIELDS)})"
        )
    values: dict[str, float] = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PolicyFileError(f"[{_TABLE}] {name} must be a number")
        values[name] = float(value)
    return values


def load_policy_file(path: Path, base: PolicyThresholds) -> PolicyThresholds:
    """:func:`parse_policy` of the file at ``path``; unreadable files are refused too."""
    document = read_policy_file(path)
    try:
        return resolve_policy(document, base)
    except PolicyFileError as exc:
        raise PolicyFileError(f"{path}: {exc}") from exc


def read_policy_file(path: Path) -> PolicyDocument:
    """:func:`read_policy` of the file at ``path``; errors name the path."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read {path}: {type(exc).__name__}") from exc
    try:
        return read_policy(text)
    except PolicyFileError as exc:
        raise PolicyFileError(f"{path}: {exc}") from exc


def render_policy(
    thresholds: Mapping[str, float],
    *,
    comments: Sequence[str] = (),
    levels: Mapping[str, str] | None = None,
) -> str:
    """A policy file holding ``levels`` (when any) and ``thresholds`` (a subset of the fields,
    in field order), with ``comments`` as ``#`` lines above. ``parse_policy`` reads back the
    same values."""
    unknown = sorted(set(thresholds) - set(THRESHOLD_FIELDS))
    if unknown:
        raise PolicyFileError(f"{unknown[0]!r} is not a threshold")
    lines = [f"# {line}".rstrip() for comment in comments for line in comment.splitlines()]
    if levels:
        lines.append(f"[{_LEVELS}]")
        lines += [f'{category} = "{level}"' for category, level in levels.items()]
        lines.append("")
    lines.append(f"[{_TABLE}]")
    for name in THRESHOLD_FIELDS:
        if name in thresholds:
            value = float(thresholds[name])
            if not math.isfinite(value):
                raise PolicyFileError(f"{name} must be a finite number")
            lines.append(f"{name} = {value!r}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class CategoryLine:
    """What a policy gives one category: its level and thresholds, and where each came from."""

    category: str
    level: str
    """The level the file names; else the level whose numbers the thresholds equal, or
    ``custom``."""
    named: bool
    """Whether the file's ``[levels]`` names the category."""
    thresholds: Mapping[str, float]
    explicit: frozenset[str]
    """The fields set under ``[thresholds]`` (they win over the level)."""


def category_lines(
    document: PolicyDocument, thresholds: PolicyThresholds, table: StrictnessTable = SHIPPED_LEVELS
) -> list[CategoryLine]:
    """Per category of ``table``, what ``thresholds`` (``document`` resolved) gives it."""
    lines: list[CategoryLine] = []
    for name, category in table.categories.items():
        named = name in document.levels
        level = document.levels[name] if named else table.level_of(thresholds, name)
        lines.append(
            CategoryLine(
                category=name,
                level=level or "custom",
                named=named,
                thresholds={f: getattr(thresholds, f) for f in category.fields},
                explicit=frozenset(f for f in category.fields if f in document.values),
            )
        )
    return lines
