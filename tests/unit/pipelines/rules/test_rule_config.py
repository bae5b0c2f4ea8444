"""Tests for pipelines.rules.config: rule files are validated completely when loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import re2

from pipelines.rule_hits import RuleAction, Severity
from pipelines.rules import (
    KeywordRule,
    ProfileRule,
    RegexRule,
    RuleLoadError,
    default_ruleset,
    load_ruleset,
    parse_ruleset,
)
from pipelines.rules.config import MatchMode, ProfileCheck, compile_re2

HEADER = 'id = "t.rule"\ncategory = "spam"\nseverity = "high"\naction = "flag"\n'


def _one(body: str) -> str:
    return "[[rules]]\n" + HEADER + body


def _error(text: str) -> RuleLoadError:
    with pytest.raises(RuleLoadError) as info:
        parse_ruleset(text)
    return info.value


def test_keyword_rule_parses_and_normalises() -> None:
    """Keywords are normalised like message text and deduplicated."""
    ruleset = parse_ruleset(
        _one(
            'kind = "keywords"\nlanguages = ["en"]\n'
            'keywords = ["FREE", "\uff46\uff52\uff45\uff45", "Money  Now"]\n'
        )
    )
    (rule,) = ruleset.rules
    assert isinstance(rule, KeywordRule)
    assert rule.keywords == ("free", "money now")
    assert rule.meta.severity is Severity.HIGH
    assert rule.meta.action is RuleAction.FLAG
    assert rule.meta.languages == ("en",)
    assert rule.meta.enabled


def test_regex_and_profile_rules_parse() -> None:
    """Regex rules keep their patterns and match mode; profile rules their parameters."""
    text = (
        _one('kind = "regex"\npatterns = ["a+b", "c"]\nmatch = "all"\n')
        + '[[rules]]\nid = "p.block"\ncategory = "abuse"\nseverity = "critical"\n'
        + 'action = "block"\nkind = "profile"\ncheck = "sender_blocklist"\nsender_ids = ["u1"]\n'
        + '[[rules]]\nid = "p.new"\ncategory = "spam"\nseverity = "low"\naction = "flag"\n'
        + 'kind = "profile"\ncheck = "new_account_link"\nmax_account_age_hours = 12\n'
        + '[[rules]]\nid = "p.strikes"\ncategory = "abuse"\nseverity = "low"\n'
        + 'action = "escalate"\nkind = "profile"\ncheck = "repeat_offender"\nmin_strikes = 2\n'
        + "enabled = false\n"
    )
    regex, blocklist, new, strikes = parse_ruleset(text).rules
    assert isinstance(regex, RegexRule)
    assert regex.patterns == ("a+b", "c")
    assert regex.match is MatchMode.ALL
    assert isinstance(blocklist, ProfileRule)
    assert blocklist.check is ProfileCheck.SENDER_BLOCKLIST
    assert blocklist.sender_ids == frozenset({"u1"})
    assert isinstance(new, ProfileRule)
    assert new.max_account_age_hours == 12.0
    assert isinstance(strikes, ProfileRule)
    assert strikes.min_strikes == 2
    assert not strikes.meta.enabled


@pytest.mark.parametrize(
    "pattern",
    [r"(a)\\1", "(?=a)b", "(?!a)b", "(?<=a)b", "(?<!a)b", "a++", "(?P<x>a)(?P=x)"],
)
def test_backtracking_only_regex_is_rejected(pattern: str) -> None:
    """Back-references and look-around cannot be compiled by RE2 and fail at load time."""
    error = _error(_one(f'kind = "regex"\npatterns = ["{pattern}"]\n'))
    assert error.rule_id == "t.rule"
    assert "RE2" in str(error)
    assert "t.rule" in str(error)


def test_exempt_spans_are_checked_like_patterns() -> None:
    """``exempt`` must be a non-empty list of RE2 patterns; keyword and regex rules may have it,
    profile rules may not."""
    rule = parse_ruleset(_one('kind = "regex"\npatterns = ["a"]\nexempt = ["b", "c"]\n')).rules[0]
    assert isinstance(rule, RegexRule)
    assert rule.exempt == ("b", "c")
    regex = 'kind = "regex"\npatterns = ["a"]\n'
    assert "exempt pattern #2" in str(_error(_one(regex + 'exempt = ["b", "(?=c)"]\n')))
    assert "'exempt'" in str(_error(_one(regex + "exempt = []\n")))
    keywords = parse_ruleset(_one('kind = "keywords"\nkeywords = ["a"]\nexempt = ["b"]\n'))
    assert keywords.rules[0].exempt == ("b",)  # type: ignore[union-attr]
    profile = 'kind = "profile"\ncheck = "repeat_offender"\nmin_strikes = 3\nexempt = ["b"]\n'
    assert "unknown keys" in str(_error(_one(profile)))


def test_shared_exempt_lists_are_added_to_the_rules_that_name_them() -> None:
    """A rule's ``exempt_lists`` adds the named ``[exempts]`` patterns after its own, once each;
    rules that do not name a list do not get it."""
    text = (
        '[exempts]\ngame = ["g1", "g2"]\nother = ["o"]\n'
        + _one(
            'kind = "regex"\npatterns = ["a"]\nexempt = ["g2", "b"]\n'
            'exempt_lists = ["game", "other"]\n'
        )
        + '[[rules]]\nid = "t.kw"\ncategory = "spam"\nseverity = "low"\naction = "flag"\n'
        'kind = "keywords"\nkeywords = ["x"]\nexempt_lists = ["other"]\n'
        + '[[rules]]\nid = "t.plain"\ncategory = "spam"\nseverity = "low"\naction = "flag"\n'
        'kind = "regex"\npatterns = ["y"]\n'
    )
    rules = parse_ruleset(text)
    assert rules.get("t.rule").exempt == ("g2", "b", "g1", "o")  # type: ignore[union-attr]
    assert rules.get("t.kw").exempt == ("o",)  # type: ignore[union-attr]
    assert rules.get("t.plain").exempt == ()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "fragment", "rule_id"),
    [
        (
            _one('kind = "regex"\npatterns = ["a"]\nexempt_lists = ["game"]\n'),
            "exempt list 'game' is not defined under [exempts] (defined: none)",
            "t.rule",
        ),
        (
            '[exempts]\ngame = ["g"]\n'
            + _one('kind = "regex"\npatterns = ["a"]\nexempt_lists = ["gaem"]\n'),
            "(defined: ['game'])",
            "t.rule",
        ),
        ("[exempts]\ngame = []\n", "non-empty array", None),
        ('[exempts]\ngame = ["ok", 3]\n', "non-empty array", None),
        ('[exempts]\n"Bad-Name" = ["g"]\n', "name must match", None),
        ("exempts = 3\n", "must be a table", None),
        ('[exempts]\ngame = ["(?=x)"]\n', "exempt list 'game' pattern #1 is not valid RE2", None),
        (_one('kind = "regex"\npatterns = ["a"]\nexempt_lists = []\n'), "'exempt_lists'", "t.rule"),
        (
            _one(
                'kind = "profile"\ncheck = "repeat_offender"\nmin_strikes = 3\n'
                'exempt_lists = ["g"]\n'
            ),
            "unknown keys",
            "t.rule",
        ),
    ],
)
def test_bad_shared_exempt_lists_are_named(text: str, fragment: str, rule_id: str | None) -> None:
    """An undefined, empty, misnamed or non-RE2 exempt list is a load error that says which."""
    error = _error(text)
    assert fragment in str(error)
    assert error.rule_id == rule_id


def test_default_game_time_exempts_are_shared_by_both_english_threat_rules() -> None:
    """The English threat rules take their game-time exempt spans from one list."""
    rules = default_ruleset()
    direct, veiled = rules.get("en.threat.direct"), rules.get("en.threat.veiled")
    assert isinstance(direct, RegexRule)
    assert isinstance(veiled, RegexRule)
    assert direct.exempt == veiled.exempt
    assert len(direct.exempt) >= 4


def test_re2_itself_rejects_what_we_reject() -> None:
    """The underlying google-re2 raises (it has no fallback engine) for a back-reference."""
    with pytest.raises(re2.error):
        compile_re2(r"(a)\1")


def test_catastrophic_pattern_is_re2_and_runs() -> None:
    """(a+)+$ compiles with RE2 (a linear-time engine) and runs once over 50,000 'a's and '!'."""
    compiled = compile_re2("(a+)+$")
    assert type(compiled) is re2._Regexp
    assert compiled.search("a" * 50_000 + "!") is None
    assert compiled.search("a" * 50_000) is not None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('kind = "keywords"\nkeywords = []\n', "non-empty"),
        ('kind = "keywords"\nkeywords = [1]\n', "only strings"),
        ('kind = "keywords"\nkeywords = ["\\u200b"]\n', "empty once canonicalised"),
        ('kind = "keywords"\nkeywords = ["a"]\npatterns = ["b"]\n', "unknown keys"),
        ('kind = "regex"\npatterns = "abc"\n', "non-empty array"),
        ('kind = "regex"\npatterns = ["a"]\nmatch = "some"\n', "'match'"),
        ('kind = "magic"\n', "'kind'"),
        ('kind = "profile"\ncheck = "astrology"\n', "'check'"),
        ('kind = "profile"\ncheck = "sender_blocklist"\nsender_ids = []\n', "non-empty"),
        ('kind = "profile"\ncheck = "sender_blocklist"\nsender_ids = [""]\n', "empty strings"),
        ('kind = "profile"\ncheck = "new_account_link"\n', "max_account_age_hours"),
        ('kind = "profile"\ncheck = "new_account_link"\nmax_account_age_hours = 0\n', "(0, 1e6)"),
        ('kind = "profile"\ncheck = "repeat_offender"\nmin_strikes = 0\n', ">= 1"),
        ('kind = "profile"\ncheck = "repeat_offender"\nmin_strikes = true\n', ">= 1"),
        (
            'kind = "profile"\ncheck = "repeat_offender"\nmin_strikes = 2\nsender_ids = ["x"]\n',
            "do not apply",
        ),
        ('kind = "keywords"\nkeywords = ["a"]\nenabled = "yes"\n', "'enabled'"),
        ('kind = "keywords"\nkeywords = ["a"]\nlanguages = "en"\n', "'languages'"),
    ],
)
def test_invalid_payloads_name_the_rule(body: str, fragment: str) -> None:
    """Every payload problem raises RuleLoadError naming the rule id and the problem."""
    error = _error(_one(body))
    assert error.rule_id == "t.rule"
    assert fragment in str(error)


@pytest.mark.parametrize(
    ("replace", "by", "fragment"),
    [
        ('severity = "high"', 'severity = "extreme"', "'severity'"),
        ('action = "flag"', 'action = "delete"', "'action'"),
        ('category = "spam"', 'category = "Spam Stuff"', "'category'"),
        ('category = "spam"\n', "", "'category'"),
    ],
)
def test_invalid_common_fields(replace: str, by: str, fragment: str) -> None:
    """Severity, action and category are checked for every rule."""
    text = _one('kind = "keywords"\nkeywords = ["a"]\n').replace(replace, by)
    error = _error(text)
    assert error.rule_id == "t.rule"
    assert fragment in str(error)


def test_bad_id_and_duplicates() -> None:
    """Ids must be well-formed and unique."""
    bad_id = _error(_one('kind = "keywords"\nkeywords = ["a"]\n').replace("t.rule", "Bad Id"))
    assert bad_id.rule_id is None
    assert "rule #1" in str(bad_id)
    rule = _one('kind = "keywords"\nkeywords = ["a"]\n')
    duplicate = _error(rule + rule)
    assert duplicate.rule_id == "t.rule"
    assert "duplicate" in str(duplicate)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[[rules]\n", "not valid TOML"),
        ("version = 2\n", "unsupported version"),
        ("rulez = []\n", "unknown top-level"),
        ("rules = 3\n", "array of tables"),
    ],
)
def test_file_level_problems(text: str, fragment: str) -> None:
    """Problems with the file itself raise RuleLoadError without a rule id."""
    error = _error(text)
    assert error.rule_id is None
    assert fragment in str(error)


def test_empty_file_is_an_empty_ruleset() -> None:
    """A file with no rules is valid and yields no rules."""
    assert parse_ruleset("").rules == ()


def test_load_ruleset_reads_a_file(tmp_path: Path) -> None:
    """load_ruleset parses a TOML file from disk; a missing file is a RuleLoadError."""
    path = tmp_path / "rules.toml"
    path.write_text(_one('kind = "keywords"\nkeywords = ["a"]\n'), encoding="utf-8")
    assert load_ruleset(path).ids() == ("t.rule",)
    with pytest.raises(RuleLoadError):
        load_ruleset(tmp_path / "missing.toml")


def test_default_ruleset_loads_and_is_enabled() -> None:
    """The shipped rule set is valid, has English and Chinese rules of every kind."""
    ruleset = default_ruleset()
    assert len(ruleset.enabled) == len(ruleset.rules) > 10
    languages = {lang for rule in ruleset.rules for lang in rule.meta.languages}
    assert {"en", "zh"} <= languages
    kinds = {type(rule) for rule in ruleset.rules}
    assert kinds == {KeywordRule, RegexRule, ProfileRule}
    assert ruleset.get("en.hate.slur").meta.action is RuleAction.BLOCK
    with pytest.raises(KeyError):
        ruleset.get("no.such.rule")


def test_invalid_utf8_is_a_rule_load_error() -> None:
    """Bytes that are not UTF-8 raise RuleLoadError naming the offset, not UnicodeDecodeError."""
    with pytest.raises(RuleLoadError, match="not UTF-8"):
        parse_ruleset(b"version = 1\n# \xff\n")
