"""Data files: hand-written word lists, training families and rule examples as TOML, each with
its provenance inside it.

Every data file of the project (``modelbuild/data/training/*.toml``,
``pipelines/rulesets/default_examples.toml``) is read by :func:`read_data_file`, which insists
on a ``[provenance]`` table saying where the text comes from::

    [provenance]
    source = "written by hand by the modstream team for this file (2026-12)"
    licence = "Apache-2.0, as the repository"
    purpose = "why these lines exist and what they are used for"
    notes = "optional: what was written after which measurement, what to keep out"

and hands back the rest of the file. What the rest holds is the business of the module that
reads that kind of file; :func:`strings` and :func:`table` check the common shapes with errors
that name the file and the key. Anything malformed raises :class:`DataFileError`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pipelines.errors import PipelineError

__all__ = [
    "DataFile",
    "DataFileError",
    "Provenance",
    "keyed_table",
    "read_data_file",
    "strings",
    "table",
]

_PROVENANCE_KEYS = frozenset({"source", "licence", "purpose", "notes"})
_REQUIRED = ("source", "licence", "purpose")


class DataFileError(PipelineError):
    """A data file that cannot be used: unreadable, not TOML, no provenance, a wrong shape."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"data file {name}: {problem}")
        self.name = name
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a data file's text comes from, under which licence, and what it is for."""

    source: str
    licence: str
    purpose: str
    notes: str = ""


@dataclass(frozen=True, slots=True)
class DataFile:
    """A parsed data file: its provenance and every other top-level key."""

    name: str
    provenance: Provenance
    body: Mapping[str, Any]


def read_data_file(path: Path | Traversable) -> DataFile:
    """Read and parse ``path`` (a file or a package resource); check its ``[provenance]``."""
    name = path.name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataFileError(name, f"cannot be read: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataFileError(name, "is not UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise DataFileError(name, f"is not valid TOML: {exc}") from exc
    found = table(name, data, "provenance")
    unknown = set(found) - _PROVENANCE_KEYS
    if unknown:
        raise DataFileError(name, f"[provenance] has unknown keys {sorted(unknown)}")
    values: dict[str, str] = {}
    for key in _PROVENANCE_KEYS & set(found):
        value = found[key]
        if not isinstance(value, str) or not value.strip():
            raise DataFileError(name, f"[provenance] {key!r} must be a non-empty string")
        values[key] = " ".join(value.split())
    missing = [key for key in _REQUIRED if key not in values]
    if missing:
        raise DataFileError(name, f"[provenance] lacks {missing}: say where the text comes from")
    body = {key: value for key, value in data.items() if key != "provenance"}
    return DataFile(name, Provenance(**values), body)


def table(name: str, parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``parent[key]``, which must be a table."""
    value = parent.get(key)
    if not isinstance(value, dict):
        raise DataFileError(name, f"{key!r} must be a table")
    return value


def keyed_table(name: str, value: object, where: str, keys: frozenset[str]) -> dict[str, Any]:
    """``value`` as a table whose keys are all among ``keys`` (an entry of an array of tables)."""
    if not isinstance(value, dict):
        raise DataFileError(name, f"{where} must be a table")
    unknown = set(value) - keys
    if unknown:
        raise DataFileError(name, f"{where} has unknown keys {sorted(unknown)}")
    return value


def strings(name: str, value: object, where: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    """``value`` as a tuple of strings: a non-empty array of strings, each non-blank unless
    ``allow_empty`` (an optional slot of a template may be filled with nothing)."""
    if not isinstance(value, list) or not value:
        raise DataFileError(name, f"{where} must be a non-empty array of strings")
    if not all(isinstance(item, str) and (allow_empty or item.strip()) for item in value):
        raise DataFileError(name, f"{where} must hold only non-empty strings")
    return tuple(value)
