"""The policy file: thresholds of ``PolicyThresholds`` in TOML, read and written in one place.

The worker and the online service load it at start and reload it when it changes
(``policy_file.path``, ``engine.policy_watch``); ``modstream policy calibrate`` writes one. The
file holds one table, ``[thresholds]``, whose keys are ``PolicyThresholds`` field names (the
per-category flag and block thresholds, the escalation band); a key the file leaves out keeps
the value the service was configured with (``MODSTREAM_POLICY__*`` or the defaults)::

    # written by modstream policy calibrate ...
    [thresholds]
    flag_hate = 0.55
    flag_offensive = 0.7

Anything else is refused with :class:`PolicyFileError` naming the problem: TOML that does not
parse, another table, an unknown key (a typo must not be silently ignored), a value that is not
a number, or thresholds that cannot work together (``PolicyThresholds``' own checks: each in
[0, 1], a flag threshold not above its block threshold, ``escalate_low < escalate_high``).
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipelines.errors import PipelineError
from pipelines.policy import PolicyConfigError, PolicyThresholds

__all__ = [
    "THRESHOLD_FIELDS",
    "PolicyFileError",
    "load_policy_file",
    "parse_policy",
    "policy_values",
    "render_policy",
]

THRESHOLD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PolicyThresholds))
"""The keys a ``[thresholds]`` table may hold, in ``PolicyThresholds``' order."""

_TABLE = "thresholds"


class PolicyFileError(PipelineError):
    """A policy file that cannot be used (the message says why; the running policy stays)."""


def parse_policy(text: str, base: PolicyThresholds) -> PolicyThresholds:
    """The thresholds of a policy file's ``text``, over ``base`` for the keys it leaves out."""
    try:
        return dataclasses.replace(base, **policy_values(text))
    except PolicyConfigError as exc:
        raise PolicyFileError(f"[{_TABLE}] {exc}") from exc


def policy_values(text: str) -> dict[str, float]:
    """The keys a policy file's ``text`` sets, checked one by one (not yet against each
    other: that needs the thresholds they are read over, see :func:`parse_policy`)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"not TOML: {exc}") from exc
    extra = sorted(set(document) - {_TABLE})
    if extra:
        raise PolicyFileError(f"unknown table or key {extra[0]!r}: only [{_TABLE}] is read")
    table = document.get(_TABLE)
    if not isinstance(table, dict):
        raise PolicyFileError(f"no [{_TABLE}] table")
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
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read {path}: {type(exc).__name__}") from exc
    try:
        return parse_policy(text, base)
    except PolicyFileError as exc:
        raise PolicyFileError(f"{path}: {exc}") from exc


def render_policy(thresholds: Mapping[str, float], *, comments: Sequence[str] = ()) -> str:
    """A policy file holding ``thresholds`` (a subset of the fields, in field order), with
    ``comments`` as ``#`` lines above the table. ``parse_policy`` reads back the same values."""
    unknown = sorted(set(thresholds) - set(THRESHOLD_FIELDS))
    if unknown:
        raise PolicyFileError(f"{unknown[0]!r} is not a threshold")
    lines = [f"# {line}".rstrip() for comment in comments for line in comment.splitlines()]
    lines.append(f"[{_TABLE}]")
    for name in THRESHOLD_FIELDS:
        if name in thresholds:
            value = float(thresholds[name])
            if not math.isfinite(value):
                raise PolicyFileError(f"{name} must be a finite number")
            lines.append(f"{name} = {value!r}")
    return "\n".join(lines) + "\n"
