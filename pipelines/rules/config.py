"""Rule files: TOML parsing and validation into an immutable ``RuleSet``.

A rule file holds an array of ``[[rules]]`` tables. Every rule has::

    id        = "en.hate.slur"       # unique, [a-z0-9_.-], at most 64 characters
    category  = "hate"               # free-form, [a-z0-9_], e.g. hate, offensive, spam
    severity  = "critical"           # low | medium | high | critical
    action    = "block"              # block | escalate | flag
    kind      = "keywords"           # keywords | regex | profile
    languages = ["en"]               # optional tags, informational
    enabled   = true                 # optional, default true; disabled rules are validated too
    yields_to_reports = true         # optional, default false; a message reporting abuse its
                                     # writer received is left to the model by this rule
                                     # (``pipelines.rules.reports``); not allowed on block rules
    yields_to_model = true           # optional, default false; the policy drops this rule's flag
                                     # when the model finds the message harmless with confidence
                                     # (``PolicyThresholds.model_clears_below``): a word-list
                                     # rule whose words have ordinary senses ("a needy little
                                     # bastard" of a sourdough starter); flag rules outside
                                     # the severe categories (``pipelines.severe_harm``) only

and the payload of its kind:

``keywords``  ``keywords = ["...", ...]``: literal phrases, canonicalised when loaded and matched
              on the canonical text and its leetspeak, mask and pinyin readings (see
              ``pipelines.canonical``). Keywords that begin or end with a letter or digit of a
              space-separated script need a word boundary on that side; CJK, kana and hangul
              keywords match anywhere. Chinese keywords also match their pinyin spelling,
              initials and homophones (``pipelines.rules.pinyin_keywords``). Optional
              ``exempt = ["...", ...]``: RE2 patterns for ordinary senses of a keyword ("a
              chink in the armour"), blanked in the canonical text before the rule's keywords
              are matched again, as for regex rules.
``regex``     ``patterns = ["...", ...]``, optional ``match = "any" | "all"`` (default
              ``any``) and optional ``exempt = ["...", ...]``: RE2 patterns for spans that do
              not count, blanked before the rule's patterns are checked again (reported
              speech: "he keeps telling me to kill myself" is not the writer's own intent, "i
              told him i want to kill myself" still is). Patterns and exempt spans use RE2
              syntax (linear time; no back-references or look-around), searched in the
              canonical text with defanged links restored (``CanonicalText.links``), which
              is already case-folded and in Simplified Chinese, and in each of its leetspeak
              readings (``CanonicalText.leet``).
``profile``   ``check`` names a user-profile rule, see ``pipelines.rules.profile``:
              ``check = "sender_blocklist"`` with ``sender_ids = ["...", ...]``;
              ``check = "new_account_link"`` with ``max_account_age_hours = 24``;
              ``check = "repeat_offender"`` with ``min_strikes = 3``.

Exempt spans that several rules share live once, in a top-level table of named lists, and a
keywords or regex rule names the lists it uses with ``exempt_lists``; their patterns are added
after the rule's own ``exempt`` ones::

    [exempts]
    game_time = ["...", ...]       # name: [a-z][a-z0-9_]*, a non-empty array of RE2 patterns

    [[rules]]
    id = "en.threat.direct"
    exempt_lists = ["game_time"]   # each name must be defined under [exempts]

Anything else (unknown keys, wrong types, duplicate ids, a pattern RE2 cannot compile, an
exempt list that is not defined) raises ``RuleLoadError`` naming the rule and the problem.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import re2

from pipelines.canonical import canonical_form
from pipelines.errors import PipelineError
from pipelines.rule_hits import RuleAction, Severity
from pipelines.severe_harm import is_severe

__all__ = [
    "RULE_FILE_KEYS",
    "KeywordRule",
    "MatchMode",
    "ProfileCheck",
    "ProfileRule",
    "RegexRule",
    "Rule",
    "RuleLoadError",
    "RuleMeta",
    "RuleSet",
    "compile_re2",
    "compile_re2_set",
    "decode_rule_document",
    "default_ruleset",
    "load_ruleset",
    "parse_exempt_lists",
    "parse_rule_table",
    "parse_rule_tables",
    "parse_ruleset",
    "rule_tables",
]

_ID = re.compile(r"[a-z0-9][a-z0-9_.\-]{0,63}")
_CATEGORY = re.compile(r"[a-z][a-z0-9_]{0,31}")
_COMMON_KEYS = frozenset(
    {
        "id",
        "category",
        "severity",
        "action",
        "kind",
        "languages",
        "enabled",
        "yields_to_reports",
        "yields_to_model",
    }
)
_KIND_KEYS = {
    "keywords": frozenset({"keywords", "exempt", "exempt_lists"}),
    "regex": frozenset({"patterns", "match", "exempt", "exempt_lists"}),
    "profile": frozenset({"check", "sender_ids", "max_account_age_hours", "min_strikes"}),
}
_RE2_MAX_MEM_BYTES = 8 << 20
_RE2_SET_MAX_MEM_BYTES = 64 << 20
"""The DFA budget of a set of many patterns, or of one pattern joining many. With RE2's default
(8 MiB) the shipped regex rules' set ran out of DFA cache and fell back to slower matching: 250 us
per message against 3 us at 64 MiB (same matches; about 32 MiB more resident memory), and the
mention frames and named spans 64 us against 4 us, measured on 3,897 dev and probe lines. Grown
past 400 patterns, one set outgrew even this budget; the regex rules now use sets of 64
patterns each (``pipelines.rules.patterns``)."""
_LIST_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
RULE_FILE_KEYS = frozenset({"rules", "version", "exempts"})
"""The top-level keys of a plain rule file (a layer adds its own, ``pipelines.rules.layers``)."""


class RuleLoadError(PipelineError):
    """A rule file that cannot be used; ``rule_id`` is ``None`` for file-level problems."""

    def __init__(self, rule_id: str | None, problem: str) -> None:
        where = f"rule {rule_id!r}" if rule_id is not None else "rule file"
        super().__init__(f"{where}: {problem}")
        self.rule_id = rule_id
        self.problem = problem


class MatchMode(StrEnum):
    """Whether a regex rule needs any one of its patterns or all of them."""

    ANY = "any"
    ALL = "all"


class ProfileCheck(StrEnum):
    SENDER_BLOCKLIST = "sender_blocklist"
    NEW_ACCOUNT_LINK = "new_account_link"
    REPEAT_OFFENDER = "repeat_offender"


@dataclass(frozen=True, slots=True)
class RuleMeta:
    """What every rule has, whatever its kind."""

    id: str
    category: str
    severity: Severity
    action: RuleAction
    languages: tuple[str, ...] = ()
    enabled: bool = True
    yields_to_reports: bool = False
    yields_to_model: bool = False


@dataclass(frozen=True, slots=True)
class KeywordRule:
    meta: RuleMeta
    keywords: tuple[str, ...]
    """Already canonical (``pipelines.canonical.canonical_form``), deduplicated, in file order."""
    exempt: tuple[str, ...] = ()
    """RE2 spans of ordinary senses: blanked before the keywords are matched again."""


@dataclass(frozen=True, slots=True)
class RegexRule:
    meta: RuleMeta
    patterns: tuple[str, ...]
    match: MatchMode = MatchMode.ANY
    exempt: tuple[str, ...] = ()
    """Spans that do not count: blanked before ``patterns`` are checked again."""


@dataclass(frozen=True, slots=True)
class ProfileRule:
    meta: RuleMeta
    check: ProfileCheck
    sender_ids: frozenset[str] = frozenset()
    max_account_age_hours: float = 0.0
    min_strikes: int = 0


Rule = KeywordRule | RegexRule | ProfileRule


@dataclass(frozen=True, slots=True)
class RuleSet:
    """A validated, immutable collection of rules (disabled ones included)."""

    rules: tuple[Rule, ...]

    @property
    def enabled(self) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if rule.meta.enabled)

    def ids(self) -> tuple[str, ...]:
        return tuple(rule.meta.id for rule in self.rules)

    def get(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.meta.id == rule_id:
                return rule
        raise KeyError(rule_id)


def compile_re2(pattern: str, *, large: bool = False) -> re2._Regexp:
    """Compile with RE2 only (linear time, no backtracking); raise ``re2.error`` if unsupported.

    ``large``: one pattern joining many alternatives (the mention frames) gets a set's DFA budget.
    """
    options = _re2_options()
    if large:
        options.max_mem = _RE2_SET_MAX_MEM_BYTES
    return re2.compile(pattern, options)


def compile_re2_set(patterns: Sequence[str]) -> re2.Set | None:
    """One RE2 set searching for all ``patterns`` at once (``Match`` gives the indices, in
    ``patterns`` order, of those found); ``None`` when there are none."""
    if not patterns:
        return None
    options = _re2_options()
    options.max_mem = _RE2_SET_MAX_MEM_BYTES
    regex_set = re2.Set.SearchSet(options)
    for pattern in patterns:
        regex_set.Add(pattern)
    regex_set.Compile()
    return regex_set


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _RE2_MAX_MEM_BYTES
    return options


def load_ruleset(path: Path) -> RuleSet:
    """Read and validate a TOML rule file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RuleLoadError(None, f"cannot read {path}: {exc.strerror}") from exc
    return parse_ruleset(data)


def default_ruleset() -> RuleSet:
    """The shipped English and Chinese rule set, ``pipelines/rulesets/default.toml``."""
    data = resources.files("pipelines").joinpath("rulesets/default.toml").read_bytes()
    return parse_ruleset(data)


def parse_ruleset(data: bytes | str) -> RuleSet:
    """Validate the text of a rule file."""
    document = decode_rule_document(data)
    unknown = set(document) - RULE_FILE_KEYS
    if unknown:
        raise RuleLoadError(None, f"unknown top-level keys {sorted(unknown)}")
    shared = parse_exempt_lists(document.get("exempts", {}))
    return RuleSet(rules=tuple(parse_rule_tables(rule_tables(document), shared)))


def decode_rule_document(data: bytes | str) -> dict[str, Any]:
    """The TOML document of a rule file (or layer), its ``version`` checked."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise RuleLoadError(None, f"not UTF-8 (byte {exc.start}): {exc.reason}") from exc
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleLoadError(None, f"not valid TOML: {exc}") from exc
    version = document.get("version", 1)
    if version != 1:
        raise RuleLoadError(None, f"unsupported version {version!r}, expected 1")
    return document


def rule_tables(document: Mapping[str, Any]) -> list[dict[str, object]]:
    """The document's ``[[rules]]`` tables, unparsed."""
    tables = document.get("rules", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise RuleLoadError(None, "'rules' must be an array of tables ([[rules]])")
    return tables


def parse_rule_tables(
    tables: Sequence[dict[str, object]],
    shared: dict[str, tuple[str, ...]],
    *,
    taken: Collection[str] = (),
) -> list[Rule]:
    """Each table parsed (:func:`parse_rule_table`), ids unique among them and new to
    ``taken`` (the ids a layer's earlier layers define)."""
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        rule = parse_rule_table(table, index, shared)
        if rule.meta.id in seen:
            raise RuleLoadError(rule.meta.id, "duplicate rule id")
        if rule.meta.id in taken:
            raise RuleLoadError(
                rule.meta.id, "already defined by a layer below: change it under [overrides]"
            )
        seen.add(rule.meta.id)
        rules.append(rule)
    return rules


def parse_exempt_lists(raw: object) -> dict[str, tuple[str, ...]]:
    """The ``[exempts]`` table: named lists of RE2 exempt patterns that rules share (also the
    lists a layer adds, ``pipelines.rules.layers``)."""
    if not isinstance(raw, dict):
        raise RuleLoadError(None, "'exempts' must be a table of named pattern lists ([exempts])")
    lists: dict[str, tuple[str, ...]] = {}
    for name, patterns in raw.items():
        if not _LIST_NAME.fullmatch(name):
            raise RuleLoadError(None, f"exempt list {name!r}: name must match {_LIST_NAME.pattern}")
        if (
            not isinstance(patterns, list)
            or not patterns
            or not all(isinstance(p, str) and p for p in patterns)
        ):
            raise RuleLoadError(
                None, f"exempt list {name!r} must be a non-empty array of non-empty strings"
            )
        _check_re2(None, f"exempt list {name!r} pattern", patterns)
        lists[name] = tuple(patterns)
    return lists


def _exempt_spans(
    rule_id: str, table: dict[str, object], shared: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The rule's own ``exempt`` patterns, then those of the lists ``exempt_lists`` names."""
    own = _string_list(rule_id, table, "exempt") if "exempt" in table else []
    _check_re2(rule_id, "exempt pattern", own)
    names = _string_list(rule_id, table, "exempt_lists") if "exempt_lists" in table else []
    spans = list(own)
    for name in names:
        if name not in shared:
            defined = sorted(shared) or "none"
            raise RuleLoadError(
                rule_id, f"exempt list {name!r} is not defined under [exempts] (defined: {defined})"
            )
        spans += [p for p in shared[name] if p not in spans]
    return tuple(spans)


def parse_rule_table(
    table: dict[str, object], index: int, shared: dict[str, tuple[str, ...]]
) -> Rule:
    """One ``[[rules]]`` table (the ``index``-th of its file) checked and built; ``shared``:
    the named exempt lists it may use. A layer re-parses the tables it overrides with this."""
    raw_id = table.get("id")
    if not isinstance(raw_id, str) or not _ID.fullmatch(raw_id):
        raise RuleLoadError(
            None, f"rule #{index + 1}: 'id' must match {_ID.pattern} (got {raw_id!r})"
        )
    rule_id = raw_id
    kind = table.get("kind")
    if kind not in _KIND_KEYS:
        raise RuleLoadError(rule_id, f"'kind' must be one of {sorted(_KIND_KEYS)}")
    assert isinstance(kind, str)
    unknown = set(table) - _COMMON_KEYS - _KIND_KEYS[kind]
    if unknown:
        raise RuleLoadError(rule_id, f"unknown keys for kind {kind!r}: {sorted(unknown)}")
    meta = _parse_meta(rule_id, table)
    if kind == "keywords":
        return _parse_keywords(meta, table, _exempt_spans(rule_id, table, shared))
    if kind == "regex":
        return _parse_regex(meta, table, _exempt_spans(rule_id, table, shared))
    return _parse_profile(meta, table)


def _parse_meta(rule_id: str, table: dict[str, object]) -> RuleMeta:
    category = table.get("category")
    if not isinstance(category, str) or not _CATEGORY.fullmatch(category):
        raise RuleLoadError(rule_id, f"'category' must match {_CATEGORY.pattern}")
    severity_name = table.get("severity")
    severities = {s.name.lower(): s for s in Severity}
    if severity_name not in severities:
        raise RuleLoadError(rule_id, f"'severity' must be one of {sorted(severities)}")
    assert isinstance(severity_name, str)
    action_name = table.get("action")
    actions = {a.value: a for a in RuleAction}
    if action_name not in actions:
        raise RuleLoadError(rule_id, f"'action' must be one of {sorted(actions)}")
    assert isinstance(action_name, str)
    languages = table.get("languages", [])
    if not isinstance(languages, list) or not all(
        isinstance(lang, str) and lang for lang in languages
    ):
        raise RuleLoadError(rule_id, "'languages' must be an array of non-empty strings")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise RuleLoadError(rule_id, "'enabled' must be a boolean")
    yields = table.get("yields_to_reports", False)
    if not isinstance(yields, bool):
        raise RuleLoadError(rule_id, "'yields_to_reports' must be a boolean")
    if yields and actions[action_name] is RuleAction.BLOCK:
        raise RuleLoadError(rule_id, "'yields_to_reports' is not allowed on a block rule")
    to_model = table.get("yields_to_model", False)
    if not isinstance(to_model, bool):
        raise RuleLoadError(rule_id, "'yields_to_model' must be a boolean")
    if to_model and actions[action_name] is not RuleAction.FLAG:
        raise RuleLoadError(rule_id, "'yields_to_model' is allowed on flag rules only")
    if to_model and is_severe(category):
        # The model has no threat, self-harm or exploitation output to be confident with.
        raise RuleLoadError(rule_id, f"'yields_to_model' is not allowed in category {category!r}")
    return RuleMeta(
        id=rule_id,
        category=category,
        severity=severities[severity_name],
        action=actions[action_name],
        languages=tuple(languages),
        enabled=enabled,
        yields_to_reports=yields,
        yields_to_model=to_model,
    )


def _string_list(rule_id: str, table: dict[str, object], key: str) -> list[str]:
    value = table.get(key)
    if not isinstance(value, list) or not value:
        raise RuleLoadError(rule_id, f"{key!r} must be a non-empty array of strings")
    if not all(isinstance(item, str) for item in value):
        raise RuleLoadError(rule_id, f"{key!r} must contain only strings")
    return [str(item) for item in value]


def _parse_keywords(
    meta: RuleMeta, table: dict[str, object], exempt: tuple[str, ...]
) -> KeywordRule:
    keywords: dict[str, None] = {}
    for position, keyword in enumerate(_string_list(meta.id, table, "keywords")):
        canonical = canonical_form(keyword)
        if not canonical:
            raise RuleLoadError(meta.id, f"keyword #{position + 1} is empty once canonicalised")
        keywords[canonical] = None
    return KeywordRule(meta=meta, keywords=tuple(keywords), exempt=exempt)


def _parse_regex(meta: RuleMeta, table: dict[str, object], exempt: tuple[str, ...]) -> RegexRule:
    patterns = _string_list(meta.id, table, "patterns")
    _check_re2(meta.id, "pattern", patterns)
    match_name = table.get("match", MatchMode.ANY.value)
    modes = {m.value: m for m in MatchMode}
    if match_name not in modes:
        raise RuleLoadError(meta.id, f"'match' must be one of {sorted(modes)}")
    assert isinstance(match_name, str)
    return RegexRule(meta=meta, patterns=tuple(patterns), match=modes[match_name], exempt=exempt)


def _check_re2(rule_id: str | None, what: str, patterns: list[str]) -> None:
    for position, pattern in enumerate(patterns):
        try:
            compile_re2(pattern)
        except re2.error as exc:
            detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
            raise RuleLoadError(
                rule_id,
                f"{what} #{position + 1} is not valid RE2 (linear-time regex; back-references"
                f" and look-around are unsupported): {detail}",
            ) from exc


def _parse_profile(meta: RuleMeta, table: dict[str, object]) -> ProfileRule:
    check_name = table.get("check")
    checks = {c.value: c for c in ProfileCheck}
    if check_name not in checks:
        raise RuleLoadError(meta.id, f"'check' must be one of {sorted(checks)}")
    assert isinstance(check_name, str)
    check = checks[check_name]
    allowed = {
        ProfileCheck.SENDER_BLOCKLIST: {"sender_ids"},
        ProfileCheck.NEW_ACCOUNT_LINK: {"max_account_age_hours"},
        ProfileCheck.REPEAT_OFFENDER: {"min_strikes"},
    }[check]
    extra = (set(table) & _KIND_KEYS["profile"]) - {"check"} - allowed
    if extra:
        raise RuleLoadError(meta.id, f"keys {sorted(extra)} do not apply to check {check_name!r}")
    if check is ProfileCheck.SENDER_BLOCKLIST:
        ids = _string_list(meta.id, table, "sender_ids")
        if not all(ids):
            raise RuleLoadError(meta.id, "'sender_ids' must not contain empty strings")
        return ProfileRule(meta=meta, check=check, sender_ids=frozenset(ids))
    if check is ProfileCheck.NEW_ACCOUNT_LINK:
        hours = table.get("max_account_age_hours")
        if isinstance(hours, bool) or not isinstance(hours, int | float) or not 0 < hours < 1e6:
            raise RuleLoadError(meta.id, "'max_account_age_hours' must be a number in (0, 1e6)")
        return ProfileRule(meta=meta, check=check, max_account_age_hours=float(hours))
    strikes = table.get("min_strikes")
    if isinstance(strikes, bool) or not isinstance(strikes, int) or strikes < 1:
        raise RuleLoadError(meta.id, "'min_strikes' must be an integer >= 1")
    return ProfileRule(meta=meta, check=check, min_strikes=strikes)
