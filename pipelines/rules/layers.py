"""Layered rule files: a file that ``extends`` another and changes it, as data.

A plain rule file (``pipelines.rules.config``) is a *base*. A *layer* names what it builds on and
says what it changes; everything it does not mention is kept::

    extends = "default"              # the shipped default set, or a path to another layer or
                                     # base, relative to this file
    disable = ["en.offensive.profanity"]     # rules kept but switched off, by id

    [overrides."profile.new_account_link"]   # a rule's fields replaced, by id
    action = "block"
    max_account_age_hours = 72

    [exempts]                        # more named exempt lists (a name below may not be reused)
    trading_talk = ["..."]

    [[rules]]                        # rules of its own, as in a base (ids new to the stack)
    id = "acme.links.shortener"
    ...

    [[examples]]                     # what its rules must fire on and leave alone
    id = "acme.links.shortener"
    examples = ["..."]
    near_misses = ["..."]

    [everyday]                       # optional: lines no rule (no severe rule) of the stack hits
    no_hits = ["..."]

    [severe.child_safety]            # a category of its own that gets the severe treatment
    floor = 1.0                      # the least review priority of its escalations, (0, 1]
    urgent = true                    # optional: first in the review queue, kept in mentions
    never_blocked = false            # optional: caps a model-driven block at flag

A layer's stack is the chain of ``extends`` down to a base: at most :data:`MAX_LAYERS` files of at
most :data:`MAX_LAYER_BYTES` each, without a cycle. Each layer is applied to what the layers
below made and checked as it is applied, so an error names the layer, the rule and the problem
(:class:`RuleLayerError`): an unknown rule id in ``disable`` or ``[overrides]``, an override of a
field the rule's kind does not have (or one that is not overridable: ``id``, ``kind``,
``category``, ``keywords``, ``patterns``, ``check``), a rule id already defined below, an
exempt list defined twice, a text rule added without examples and near misses, and everything a
base refuses (the overridden rule is validated again as a whole).

Overridable fields (the value replaces the one below): ``action``, ``severity``, ``languages``,
``yields_to_reports``, ``yields_to_model``; ``exempt``, ``exempt_lists`` (an empty list removes
them) and ``match`` of keyword and regex rules; ``sender_ids``, ``max_account_age_hours`` and
``min_strikes`` of the profile rules that have them.

Applying a layer re-parses only the rules it touches, and a stack already composed from the
same files (by content) is reused, so a thousand tenant files over a few shared layers cost a
few compositions (:func:`load_rule_stack`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from pipelines.data_files import DataFileError
from pipelines.rules.config import (
    RULE_FILE_KEYS,
    ProfileRule,
    Rule,
    RuleLoadError,
    RuleSet,
    decode_rule_document,
    parse_exempt_lists,
    parse_rule_table,
    parse_rule_tables,
    rule_tables,
)
from pipelines.rules.examples import RuleExampleSet, default_rule_examples, parse_example_tables
from pipelines.severe_harm import SHIPPED, SevereCategory, SevereTable, severe_category

__all__ = [
    "DEFAULT_LAYER",
    "MAX_LAYERS",
    "MAX_LAYER_BYTES",
    "ChangeKind",
    "LayerReport",
    "RuleChange",
    "RuleLayerError",
    "RuleStack",
    "default_stack",
    "load_rule_stack",
    "stack_files",
]

DEFAULT_LAYER = "default"
"""The name ``extends`` gives the shipped set, ``pipelines/rulesets/default.toml``."""
MAX_LAYERS = 8
"""The most files one stack may have, its base included."""
MAX_LAYER_BYTES = 1 << 20
"""The largest layer file read (1 MiB; the shipped default is about 90 KiB)."""

_LAYER_KEYS = frozenset({"extends", "disable", "overrides", "examples", "everyday", "severe"})
_SEVERE_KEYS = frozenset({"floor", "urgent", "never_blocked", "what"})
_CATEGORY = re.compile(r"[a-z][a-z0-9_]{0,31}")
_META_FIELDS = frozenset(
    {"action", "severity", "languages", "yields_to_reports", "yields_to_model"}
)
_OVERRIDABLE = {
    "keywords": _META_FIELDS | {"exempt", "exempt_lists"},
    "regex": _META_FIELDS | {"exempt", "exempt_lists", "match"},
    "profile": _META_FIELDS | {"sender_ids", "max_account_age_hours", "min_strikes"},
}
_PROFILE_FIELDS = {
    "sender_blocklist": "sender_ids",
    "new_account_link": "max_account_age_hours",
    "repeat_offender": "min_strikes",
}
_REMOVABLE = ("exempt", "exempt_lists")
"""Fields an override may empty (``exempt_lists = []``): the rule then has none."""
_CACHED_STACKS = 256
"""Compositions kept for reuse (a tenant folder with more distinct files composes again)."""


class RuleLayerError(RuleLoadError):
    """A layer that cannot be used: ``layer`` names its file (``default`` for the shipped set)."""

    def __init__(self, layer: str, rule_id: str | None, problem: str) -> None:
        super().__init__(rule_id, problem)
        self.layer = layer
        self.args = (f"layer {layer}: {self.args[0]}",)


class ChangeKind(StrEnum):
    ADDED = "added"
    OVERRIDDEN = "overridden"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class RuleChange:
    """What one layer did to one rule; ``fields``: (field, value below, value now)."""

    rule_id: str
    kind: ChangeKind
    fields: tuple[tuple[str, object, object], ...] = ()


@dataclass(frozen=True, slots=True)
class LayerReport:
    """One layer of a stack: its name, what it changed and its own examples."""

    name: str
    changes: tuple[RuleChange, ...]
    examples: RuleExampleSet


@dataclass(frozen=True, slots=True, eq=False)
class RuleStack:
    """The rules a chain of layers makes, base first; immutable and shared."""

    key: str
    """A digest of the chain's file contents: the same files give the same key."""
    layers: tuple[LayerReport, ...]
    ruleset: RuleSet
    paths: tuple[Path, ...]
    """The files read, this one first (the shipped default is not among them)."""
    tables: Mapping[str, Mapping[str, object]]
    """Each rule's table as the layers left it, by id in rule order (for the next layer)."""
    exempts: Mapping[str, tuple[str, ...]]
    """The named exempt lists every layer defined."""
    severe: SevereTable = SHIPPED
    """The severe categories: the shipped ones and those its layers add."""
    below: RuleStack | None = None
    """The stack without its top layer (``None`` for a base)."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)


@dataclass(frozen=True, slots=True)
class _Layer:
    """A layer file read: its name, digest, where it points and its document."""

    name: str
    digest: str
    extends: str | None
    document: Mapping[str, Any]


_cache: dict[tuple[str, str], RuleStack] = {}
_documents: dict[str, _Layer] = {}
_cache_lock = threading.Lock()


def default_stack() -> RuleStack:
    """The shipped set as a one-layer stack, with ``default_examples.toml`` as its examples."""
    data = resources.files("pipelines").joinpath("rulesets/default.toml").read_bytes()
    return _composed(None, _read(DEFAULT_LAYER, data), default_rule_examples())


def load_rule_stack(path: Path) -> RuleStack:
    """Read ``path`` and every layer it ``extends``, and compose them (module docstring)."""
    chain: list[_Layer] = []
    paths: list[Path] = []
    seen: set[Path] = set()
    current: Path | None = path
    while current is not None:
        if len(chain) == MAX_LAYERS:
            names = " > ".join(layer.name for layer in chain)
            raise RuleLayerError(path.name, None, f"more than {MAX_LAYERS} layers: {names} > ...")
        resolved = current.resolve()
        if resolved in seen:
            names = " > ".join(layer.name for layer in chain)
            raise RuleLayerError(
                current.name, None, f"a cycle in 'extends': {names} > {current.name}"
            )
        seen.add(resolved)
        layer = _read(current.name, _read_bytes(current))
        chain.append(layer)
        paths.append(current)
        extends = layer.extends
        current = None if extends in (None, DEFAULT_LAYER) else current.parent / str(extends)
    stack = default_stack() if chain[-1].extends == DEFAULT_LAYER else None
    for layer in reversed(chain):
        stack = _composed(stack, layer)
    assert stack is not None
    return replace(stack, paths=tuple(paths))


def stack_files(path: Path) -> tuple[Path, ...]:
    """The files ``path``'s stack reads, as far as they can be read: what to watch for a layer
    that did not load (a broken file below it may be fixed without touching it)."""
    files: list[Path] = []
    current: Path | None = path
    while current is not None and len(files) < MAX_LAYERS and current not in files:
        files.append(current)
        try:
            extends = _read(current.name, _read_bytes(current)).extends
        except RuleLoadError:
            break
        current = None if extends in (None, DEFAULT_LAYER) else current.parent / str(extends)
    return tuple(files)


def _composed(
    below: RuleStack | None, layer: _Layer, examples: RuleExampleSet | None = None
) -> RuleStack:
    """The stack ``layer`` makes over ``below`` (``None``: ``layer`` is a base), composed once
    per content."""
    key = (below.key if below is not None else "", layer.digest)
    with _cache_lock:
        found = _cache.get(key)
    if found is not None:
        # The same contents under other names: the rules are shared, the names are these.
        top = replace(found.layers[-1], name=layer.name)
        below_layers = below.layers if below is not None else ()
        return replace(found, layers=(*below_layers, top), below=below)
    stack = _base(layer, examples) if below is None else _apply(below, layer)
    with _cache_lock:
        if len(_cache) >= _CACHED_STACKS:
            _cache.pop(next(iter(_cache)))
        _cache[key] = stack
    return stack


def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_LAYER_BYTES:
            raise RuleLayerError(
                path.name, None, f"{size} bytes, more than the {MAX_LAYER_BYTES} a layer may have"
            )
        return path.read_bytes()
    except OSError as exc:
        raise RuleLayerError(path.name, None, f"cannot read {path}: {exc.strerror}") from exc


def _read(name: str, data: bytes) -> _Layer:
    """``data`` parsed as the layer ``name``; a text already parsed is not parsed again (a
    thousand tenant files over one large base read that base a thousand times)."""
    digest = hashlib.sha256(data).hexdigest()
    with _cache_lock:
        known = _documents.get(digest)
    if known is not None:
        return replace(known, name=name)
    layer = _parse(name, data, digest)
    with _cache_lock:
        if len(_documents) >= _CACHED_STACKS:
            _documents.pop(next(iter(_documents)))
        _documents[digest] = layer
    return layer


def _parse(name: str, data: bytes, digest: str) -> _Layer:
    try:
        document = decode_rule_document(data)
    except RuleLoadError as exc:
        raise RuleLayerError(name, exc.rule_id, exc.problem) from exc
    unknown = set(document) - RULE_FILE_KEYS - _LAYER_KEYS
    if unknown:
        raise RuleLayerError(name, None, f"unknown top-level keys {sorted(unknown)}")
    extends = document.get("extends")
    if extends is not None and (not isinstance(extends, str) or not extends.strip()):
        raise RuleLayerError(name, None, "'extends' must be a file name or \"default\"")
    if extends is None and ("disable" in document or "overrides" in document):
        raise RuleLayerError(name, None, "'disable' and [overrides] need 'extends'")
    return _Layer(name, digest, extends, document)


def _base(layer: _Layer, examples: RuleExampleSet | None) -> RuleStack:
    """A base: a plain rule file (and, in a layer's shape, its own examples)."""
    try:
        exempts = parse_exempt_lists(layer.document.get("exempts", {}))
        tables = rule_tables(layer.document)
        rules = parse_rule_tables(tables, exempts)
    except RuleLoadError as exc:
        raise RuleLayerError(layer.name, exc.rule_id, exc.problem) from exc
    own = examples if examples is not None else _examples(layer, rules)
    changes = tuple(RuleChange(rule.meta.id, ChangeKind.ADDED) for rule in rules)
    severe = _severe(layer, SHIPPED, rules)
    return RuleStack(
        key=layer.digest,
        layers=(LayerReport(layer.name, changes, own),),
        ruleset=RuleSet(tuple(rules)),
        paths=(),
        tables={rule.meta.id: table for rule, table in zip(rules, tables, strict=True)},
        exempts=exempts,
        severe=severe,
    )


def _apply(below: RuleStack, layer: _Layer) -> RuleStack:
    """``layer`` over ``below``: disabled, overridden, then added rules, each checked."""
    try:
        added_exempts = parse_exempt_lists(layer.document.get("exempts", {}))
    except RuleLoadError as exc:
        raise RuleLayerError(layer.name, exc.rule_id, exc.problem) from exc
    twice = sorted(set(added_exempts) & set(below.exempts))
    if twice:
        raise RuleLayerError(
            layer.name, None, f"exempt lists {twice} are defined below: name a new list"
        )
    exempts = {**below.exempts, **added_exempts}
    rules = {rule.meta.id: rule for rule in below.ruleset.rules}
    tables = dict(below.tables)
    changes: list[RuleChange] = []
    for rule_id, fields in _overrides(layer, rules).items():
        before = tables[rule_id]
        table = {**before, **fields}
        for key in _REMOVABLE:  # an empty list removes them: "exempt_lists = []"
            if table.get(key) == []:
                del table[key]
        try:
            rules[rule_id] = parse_rule_table(dict(table), 0, exempts)
        except RuleLoadError as exc:
            raise RuleLayerError(layer.name, rule_id, exc.problem) from exc
        tables[rule_id] = table
        changed = tuple((k, before.get(k), v) for k, v in fields.items() if before.get(k) != v)
        changes.append(RuleChange(rule_id, ChangeKind.OVERRIDDEN, changed))
    for rule_id in _disabled(layer, rules):
        rule = rules[rule_id]
        rules[rule_id] = replace(rule, meta=replace(rule.meta, enabled=False))
        tables[rule_id] = {**tables[rule_id], "enabled": False}
        changes.append(RuleChange(rule_id, ChangeKind.DISABLED))
    try:
        new_tables = rule_tables(layer.document)
        added = parse_rule_tables(new_tables, exempts, taken=rules.keys())
    except RuleLoadError as exc:
        raise RuleLayerError(layer.name, exc.rule_id, exc.problem) from exc
    for table, rule in zip(new_tables, added, strict=True):
        rules[rule.meta.id] = rule
        tables[rule.meta.id] = table
        changes.append(RuleChange(rule.meta.id, ChangeKind.ADDED))
    examples = _examples(layer, list(rules.values()), require_for=added)
    severe = _severe(layer, below.severe, list(rules.values()))
    return RuleStack(
        key=hashlib.sha256(f"{below.key}>{layer.digest}".encode()).hexdigest(),
        layers=(*below.layers, LayerReport(layer.name, tuple(changes), examples)),
        ruleset=RuleSet(tuple(rules.values())),
        paths=(),
        tables=tables,
        exempts=exempts,
        severe=severe,
        below=below,
    )


def _severe(layer: _Layer, below: SevereTable, rules: Sequence[Rule]) -> SevereTable:
    """``below`` with the layer's ``[severe.<category>]`` tables added: ``floor`` in (0, 1],
    optional ``urgent``, ``never_blocked`` and ``what``; a category already severe is refused,
    and so is ``yields_to_model`` on a rule of a category that becomes severe."""
    raw = layer.document.get("severe", {})
    if not isinstance(raw, dict):
        raise RuleLayerError(layer.name, None, "'severe' must be a table of tables ([severe.x])")
    added: list[SevereCategory] = []
    for name, entry in raw.items():
        if not _CATEGORY.fullmatch(name):
            raise RuleLayerError(
                layer.name, None, f"severe category {name!r} must match {_CATEGORY.pattern}"
            )
        if below.is_severe(name):
            raise RuleLayerError(layer.name, None, f"{name!r} is already a severe category")
        try:
            added.append(severe_category(layer.name, entry, f"severe.{name}", _SEVERE_KEYS))
        except DataFileError as exc:
            raise RuleLayerError(layer.name, None, exc.problem) from exc
    if not added:
        return below
    table = below.with_categories(added)
    for rule in rules:
        if rule.meta.yields_to_model and rule.meta.enabled and table.is_severe(rule.meta.category):
            raise RuleLayerError(
                layer.name,
                rule.meta.id,
                f"'yields_to_model' is not allowed in category {rule.meta.category!r},"
                " severe in this stack",
            )
    return table


def _disabled(layer: _Layer, rules: Mapping[str, Rule]) -> list[str]:
    raw = layer.document.get("disable", [])
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise RuleLayerError(layer.name, None, "'disable' must be an array of rule ids")
    for rule_id in raw:
        if rule_id not in rules:
            raise RuleLayerError(layer.name, rule_id, "cannot disable: no such rule below")
    if len(set(raw)) != len(raw):
        raise RuleLayerError(layer.name, None, "'disable' names a rule twice")
    return list(raw)


def _overrides(layer: _Layer, rules: Mapping[str, Rule]) -> dict[str, dict[str, object]]:
    raw = layer.document.get("overrides", {})
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise RuleLayerError(
            layer.name, None, "'overrides' must be a table of tables ([overrides.\"rule.id\"])"
        )
    for rule_id, fields in raw.items():
        if rule_id not in rules:
            raise RuleLayerError(layer.name, rule_id, "cannot override: no such rule below")
        if not fields:
            raise RuleLayerError(layer.name, rule_id, "an override must change a field")
        rule = rules[rule_id]
        kind = _kind(rule)
        allowed = set(_OVERRIDABLE[kind])
        if isinstance(rule, ProfileRule):
            allowed -= {f for c, f in _PROFILE_FIELDS.items() if c != rule.check.value}
        refused = sorted(set(fields) - allowed)
        if refused:
            raise RuleLayerError(
                layer.name,
                rule_id,
                f"cannot override {refused} of this {kind} rule (overridable: {sorted(allowed)})",
            )
    return raw


def _kind(rule: Rule) -> str:
    if isinstance(rule, ProfileRule):
        return "profile"
    return "regex" if hasattr(rule, "patterns") else "keywords"


def _examples(
    layer: _Layer, stack: Sequence[Rule], *, require_for: Sequence[Rule] = ()
) -> RuleExampleSet:
    """The layer's ``[[examples]]`` and ``[everyday]``; every entry names a rule of the
    ``stack``, and every text rule of ``require_for`` (those a layer adds) has one. A base,
    as before layers, needs none."""
    everyday = layer.document.get("everyday")
    if everyday is not None and not isinstance(everyday, dict):
        raise RuleLayerError(layer.name, None, "'everyday' must be a table")
    try:
        examples = parse_example_tables(
            layer.name, layer.document.get("examples"), everyday, required=False
        )
    except DataFileError as exc:
        raise RuleLayerError(layer.name, None, exc.problem) from exc
    ids = {rule.meta.id for rule in stack}
    for rule_id in examples.rules:
        if rule_id not in ids:
            raise RuleLayerError(layer.name, rule_id, "has examples but no such rule")
    for rule in require_for:
        if not isinstance(rule, ProfileRule) and rule.meta.id not in examples.rules:
            raise RuleLayerError(
                layer.name, rule.meta.id, "added without [[examples]] (examples and near misses)"
            )
    return examples
