"""Phrase-pattern data files: the frames and named spans the rule mechanisms search for.

What makes a message a report of received abuse (``pipelines.rules.reports``) and what makes a
quote a mention rather than abuse (``pipelines.rules.mentions``) is phrase knowledge, kept as
data in ``pipelines/phrases/*.toml`` with its provenance (:mod:`pipelines.data_files`); the
Python modules keep the mechanisms (searching, span extraction, blanking). A file holds::

    [provenance]                      # where the phrases come from (required)
    ...

    [fragments]                       # optional: pieces several patterns share, written
    told = '''...'''                  # ${told} inside a pattern

    [[en_frames]]                     # a group: an array of pattern tables, in order
    pattern = '''...'''               # RE2, searched in the canonical text
    examples = [{ text = "...", finds = "..." }]

Every pattern has at least one example: a line whose canonical text the pattern alone matches,
and ``finds``, what it matches there (the whole match, or for a group of named spans its one
capture group). The unit tests check each example; :func:`read_phrase_file` checks the shape,
that every ``${name}`` is a fragment, and compiles every pattern with RE2.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

import re2

from pipelines.data_files import (
    DataFile,
    DataFileError,
    Provenance,
    keyed_table,
    read_data_file,
    table,
)

__all__ = [
    "PhraseExample",
    "PhraseFile",
    "PhrasePattern",
    "joined_alternatives",
    "phrase_file",
    "read_phrase_file",
]

_FRAGMENT_REF = re.compile(r"\$\{([a-z_]+)\}")
_PATTERN_KEYS = frozenset({"pattern", "examples"})
_EXAMPLE_KEYS = frozenset({"text", "finds"})


@dataclass(frozen=True, slots=True)
class PhraseExample:
    """A line a pattern matches, and what it finds in the line's canonical text."""

    text: str
    finds: str


@dataclass(frozen=True, slots=True)
class PhrasePattern:
    """One RE2 pattern, fragments filled in, with its examples."""

    pattern: str
    examples: tuple[PhraseExample, ...]


@dataclass(frozen=True, slots=True)
class PhraseFile:
    """A read phrase file: its provenance and its groups of patterns, in file order."""

    name: str
    provenance: Provenance
    groups: Mapping[str, tuple[PhrasePattern, ...]]

    def patterns(self, *groups: str) -> tuple[str, ...]:
        """The patterns of ``groups``, in that order."""
        return tuple(p.pattern for group in groups for p in self.groups[group])


def joined_alternatives(patterns: tuple[str, ...]) -> str:
    """One pattern matching any of ``patterns``: each in a non-capturing group, joined by ``|``."""
    return "|".join(f"(?:{pattern})" for pattern in patterns)


@functools.cache
def phrase_file(name: str) -> PhraseFile:
    """The shipped ``pipelines/phrases/<name>.toml``, read once."""
    return read_phrase_file(read_data_file(resources.files("pipelines").joinpath("phrases", name)))


def read_phrase_file(data: DataFile) -> PhraseFile:
    """A read data file as a phrase file (module docstring); :class:`DataFileError` if not."""
    fragments = dict(table(data.name, data.body, "fragments")) if "fragments" in data.body else {}
    if not all(isinstance(v, str) and v for v in fragments.values()):
        raise DataFileError(data.name, "[fragments] must hold non-empty strings")
    used: set[str] = set()
    groups: dict[str, tuple[PhrasePattern, ...]] = {}
    for group, raw in data.body.items():
        if group == "fragments":
            continue
        if not isinstance(raw, list) or not raw:
            raise DataFileError(data.name, f"{group!r} must be a non-empty array of tables")
        groups[group] = tuple(
            _pattern(data.name, f"{group}[{i}]", entry, fragments, used)
            for i, entry in enumerate(raw)
        )
    unused = sorted(set(fragments) - used)
    if unused:
        raise DataFileError(data.name, f"fragments {unused} are not used")
    return PhraseFile(data.name, data.provenance, groups)


def _pattern(
    name: str, where: str, raw: object, fragments: Mapping[str, str], used: set[str]
) -> PhrasePattern:
    entry = keyed_table(name, raw, where, _PATTERN_KEYS)
    written = entry.get("pattern")
    if not isinstance(written, str) or not written:
        raise DataFileError(name, f"{where}.pattern must be a non-empty string")

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in fragments:
            raise DataFileError(name, f"{where}: no fragment {match.group(1)!r}")
        used.add(match.group(1))
        return str(fragments[match.group(1)])

    pattern = _FRAGMENT_REF.sub(fill, written)
    try:
        re2.compile(pattern)
    except re2.error as exc:
        raise DataFileError(name, f"{where}.pattern is not valid RE2: {exc}") from exc
    examples = entry.get("examples")
    if not isinstance(examples, list) or not examples:
        raise DataFileError(name, f"{where} needs examples ({{ text, finds }} tables)")
    found: list[PhraseExample] = []
    for i, example in enumerate(examples):
        fields = keyed_table(name, example, f"{where}.examples[{i}]", _EXAMPLE_KEYS)
        text, finds = fields.get("text"), fields.get("finds")
        if not isinstance(text, str) or not isinstance(finds, str) or not text or not finds:
            raise DataFileError(name, f"{where}.examples[{i}] needs a text and what it finds")
        found.append(PhraseExample(text, finds))
    return PhrasePattern(pattern, tuple(found))
