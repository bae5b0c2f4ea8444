"""The hand-written training data: ``modelbuild/data/training/*.toml``, and the lines it makes.

Each file carries its provenance (:mod:`pipelines.data_files`); what they hold:

``word_lists.toml``
    named word lists (``[lists]``: the groups the hate families attack, everyday insults,
    animal names, spam links) and ``[insult_words]``, the everyday insults by language, which
    fill the insult templates and are kept out of the benign fillers
    (:func:`modelbuild.datasets.benign_words`).
``lexicon_templates.toml``
    sentence frames filled with packaged lexicon words by :func:`modelbuild.datasets.synthetic`
    (``{w}`` a word, ``{g}`` a group, ``{p}`` a product, ``{n}`` a number).
``abuse.toml``, ``threats.toml``, ``spam.toml``, ``hard_negatives.toml``, ``counterfactuals.toml``
    template families (:mod:`modelbuild.template_families`)::

        lines_per_family = 60          # how many distinct lines each family gives
        label = "offensive"            # the label of every family that names none itself

        [[families]]
        lang = "en"                    # en | zh
        topic = "threat"               # unique per language within the file
        label = "offensive"            # optional: benign | offensive | hate | spam | advertisement
        note = "..."                   # optional: why this family was written, from what
        templates = ["i will {harm} you {when}", ...]

        [families.slots]
        harm = ["kill", "stab", ...]                  # the values of {harm}
        group = { lists = ["en_groups"] }             # or named lists of word_lists.toml

    Every ``{slot}`` of a template has values and every slot is used by some template.

Malformed files raise :class:`pipelines.data_files.DataFileError`. Files are read once per
process.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from modelbuild.template_families import Family, TemplateLine, fields, lines_of
from pipelines.data_files import (
    DataFile,
    DataFileError,
    Provenance,
    keyed_table,
    read_data_file,
    strings,
    table,
)

__all__ = [
    "FAMILY_FILES",
    "LABELS",
    "FamilyFile",
    "LexiconTemplates",
    "family_file",
    "insult_words",
    "lexicon_templates",
    "parse_family_file",
    "template_lines",
    "word_lists",
]

FAMILY_FILES = ("abuse", "threats", "spam", "hard_negatives", "counterfactuals")
"""The template-family files, by name (``<name>.toml``)."""
LABELS = ("benign", "offensive", "hate", "spam", "advertisement")
"""What a family's lines may be labelled; the build maps them to each task's classes."""
_LANGS = ("en", "zh")
_FAMILY_KEYS = frozenset({"lang", "topic", "label", "note", "templates", "slots"})
_LEXICON_FIELDS = {
    "insult": frozenset({"w", "n"}),
    "hate": frozenset({"w", "g", "n"}),
    "hate_groups": frozenset(),
    "advertisement": frozenset({"p", "w", "n"}),
    "ad_products": frozenset(),
    "neutral_frame": frozenset({"w", "n"}),
}


@dataclass(frozen=True, slots=True)
class FamilyFile:
    """One template-family file."""

    name: str
    provenance: Provenance
    lines_per_family: int
    families: tuple[Family, ...]


@dataclass(frozen=True, slots=True)
class LexiconTemplates:
    """``lexicon_templates.toml``: each table by language."""

    provenance: Provenance
    insult: Mapping[str, tuple[str, ...]]
    hate: Mapping[str, tuple[str, ...]]
    hate_groups: Mapping[str, tuple[str, ...]]
    advertisement: Mapping[str, tuple[str, ...]]
    ad_products: Mapping[str, tuple[str, ...]]
    neutral_frame: Mapping[str, tuple[str, ...]]


def _resource(name: str) -> Traversable:
    return resources.files("modelbuild").joinpath("data", "training", f"{name}.toml")


def _fields_of(file: str, template: str, where: str) -> set[str]:
    try:
        return set(fields(template))
    except ValueError as exc:
        raise DataFileError(file, f"{where}: template {template!r} is malformed: {exc}") from exc


def _values(
    file: str, value: object, where: str, named: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """An array of strings (``""`` leaves the slot empty), or ``{ lists = [...] }``: named
    lists concatenated in order."""
    if not isinstance(value, dict):
        return strings(file, value, where, allow_empty=True)
    if set(value) != {"lists"}:
        raise DataFileError(file, f"{where} must be an array or {{ lists = [...] }}")
    out: list[str] = []
    for list_name in strings(file, value["lists"], f"{where}.lists"):
        if list_name not in named:
            raise DataFileError(file, f"{where} names {list_name!r}, not in word_lists.toml")
        out += named[list_name]
    return tuple(out)


@functools.cache
def _word_lists_file() -> tuple[Mapping[str, tuple[str, ...]], Mapping[str, tuple[str, ...]]]:
    data = read_data_file(_resource("word_lists"))
    lists = {
        key: strings(data.name, value, f"lists.{key}")
        for key, value in table(data.name, data.body, "lists").items()
    }
    insults = {
        lang: _values(data.name, value, f"insult_words.{lang}", lists)
        for lang, value in table(data.name, data.body, "insult_words").items()
    }
    if sorted(insults) != sorted(_LANGS):
        raise DataFileError(data.name, f"insult_words must have exactly {list(_LANGS)}")
    return lists, insults


def word_lists() -> Mapping[str, tuple[str, ...]]:
    """The named lists of ``word_lists.toml``."""
    return _word_lists_file()[0]


def insult_words() -> dict[str, tuple[str, ...]]:
    """Everyday insult words by language (``[insult_words]`` of ``word_lists.toml``)."""
    return dict(_word_lists_file()[1])


def _family(
    file: str,
    raw: object,
    position: int,
    default_label: object,
    named: Mapping[str, tuple[str, ...]],
) -> Family:
    where = f"families[{position}]"
    raw = keyed_table(file, raw, where, _FAMILY_KEYS)
    lang, topic = raw.get("lang"), raw.get("topic")
    if lang not in _LANGS:
        raise DataFileError(file, f"{where}.lang must be one of {list(_LANGS)}")
    if not isinstance(topic, str) or not topic:
        raise DataFileError(file, f"{where}.topic must be a non-empty string")
    where = f"family {lang}/{topic}"
    label = raw.get("label", default_label)
    if label not in LABELS:
        raise DataFileError(file, f"{where}: label must be one of {list(LABELS)}")
    if "note" in raw and not isinstance(raw["note"], str):
        raise DataFileError(file, f"{where}: note must be a string")
    templates = strings(file, raw.get("templates"), f"{where}.templates")
    slots = {
        key: _values(file, value, f"{where}.slots.{key}", named)
        for key, value in table(file, raw, "slots").items()
    }
    used = set().union(*(_fields_of(file, t, where) for t in templates))
    if used - set(slots):
        raise DataFileError(
            file, f"{where}: templates use slots without values {sorted(used - set(slots))}"
        )
    if set(slots) - used:
        raise DataFileError(file, f"{where}: slots no template uses {sorted(set(slots) - used)}")
    return Family(str(lang), topic, templates, slots, str(label))


@functools.cache
def family_file(name: str) -> FamilyFile:
    """The template-family file ``<name>.toml``, one of :data:`FAMILY_FILES`."""
    if name not in FAMILY_FILES:
        raise KeyError(f"{name!r} is not a family file; they are {list(FAMILY_FILES)}")
    return parse_family_file(read_data_file(_resource(name)), word_lists())


def parse_family_file(data: DataFile, lists: Mapping[str, tuple[str, ...]]) -> FamilyFile:
    """A read family file checked and expanded into :class:`Family` objects; ``lists`` are the
    named word lists its slots may use."""
    per_family = data.body.get("lines_per_family")
    if isinstance(per_family, bool) or not isinstance(per_family, int) or per_family < 1:
        raise DataFileError(data.name, "lines_per_family must be an integer >= 1")
    default_label = data.body.get("label")
    raw_families = data.body.get("families")
    if not isinstance(raw_families, list) or not raw_families:
        raise DataFileError(data.name, "needs at least one [[families]] table")
    families = tuple(
        _family(data.name, raw, i, default_label, lists) for i, raw in enumerate(raw_families)
    )
    keys = [(f.lang, f.topic) for f in families]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise DataFileError(data.name, f"language/topic pairs repeat: {repeated}")
    return FamilyFile(data.name, data.provenance, per_family, families)


def template_lines(
    name: str, seed: int, per_family: int | None = None, lang: str | None = None
) -> list[TemplateLine]:
    """The lines of family file ``name``: up to ``per_family`` (default: the file's
    ``lines_per_family``) distinct lines per family, in file order, of ``lang`` alone or both
    languages; the same seed gives the same lines."""
    found = family_file(name)
    families = [f for f in found.families if lang is None or f.lang == lang]
    return lines_of(
        families, seed, per_family if per_family is not None else found.lines_per_family
    )


@functools.cache
def lexicon_templates() -> LexiconTemplates:
    """``lexicon_templates.toml``."""
    data = read_data_file(_resource("lexicon_templates"))
    unknown = set(data.body) - set(_LEXICON_FIELDS)
    if unknown:
        raise DataFileError(data.name, f"unknown tables {sorted(unknown)}")
    tables: dict[str, Mapping[str, tuple[str, ...]]] = {}
    for key, allowed in _LEXICON_FIELDS.items():
        by_lang: dict[str, tuple[str, ...]] = {}
        for lang, value in table(data.name, data.body, key).items():
            if lang not in _LANGS:
                raise DataFileError(data.name, f"{key}.{lang}: languages are {list(_LANGS)}")
            items = strings(data.name, value, f"{key}.{lang}")
            for item in items:
                extra = _fields_of(data.name, item, f"{key}.{lang}") - allowed
                if extra:
                    raise DataFileError(data.name, f"{key}.{lang}: {item!r} uses {sorted(extra)}")
            by_lang[lang] = items
        tables[key] = by_lang
    return LexiconTemplates(data.provenance, **tables)
