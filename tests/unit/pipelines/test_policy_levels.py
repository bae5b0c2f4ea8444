"""Tests for pipelines.policy_levels and the ``[levels]`` table of a policy file: the shipped
table's invariants, how levels and explicit thresholds combine, every refusal, and what ``off``
does to a decision."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from pipelines.data_files import DataFileError, read_data_file
from pipelines.policy import OFF_THRESHOLD, PolicyThresholds, decide
from pipelines.policy_file import (
    PolicyFileError,
    category_lines,
    parse_policy,
    read_policy,
    render_policy,
)
from pipelines.policy_levels import LEVELS, OFF, SHIPPED_LEVELS, read_strictness_table
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import HARM_LABELS, ModelScores
from pipelines.severe_harm import is_severe
from pipelines.verdict import Decision

BASE = PolicyThresholds()
SEVERE = ("threat", "self_harm", "self_harm_incitement")


def _scores(
    *, offensive: float = 0.0, hate: float = 0.0, harms: dict[str, float] | None = None
) -> ModelScores:
    row = tuple((harms or {}).get(label, 0.0) for label in HARM_LABELS)
    return ModelScores(
        sentiment=(0.2, 0.6, 0.2),
        intent=(1.0, 0.0, 0.0, 0.0),
        toxicity=(1.0 - offensive - hate, offensive, hate),
        harms=row if harms is not None else None,
    )


# -- the shipped table ---------------------------------------------------------------------


def test_medium_is_the_shipped_default_of_every_category() -> None:
    """A tenant at ``medium`` everywhere decides exactly as the default tenant does."""
    levels = "\n".join(f'{c} = "medium"' for c in SHIPPED_LEVELS.categories)
    assert parse_policy(f"[levels]\n{levels}\n", BASE) == BASE
    for category in SHIPPED_LEVELS.categories:
        assert SHIPPED_LEVELS.level_of(BASE, category) == "medium"


def test_every_flag_and_block_threshold_has_exactly_one_category() -> None:
    """The escalation band and clearing are the only fields no level sets."""
    fields = [f for c in SHIPPED_LEVELS.categories.values() for f in c.fields]
    assert len(fields) == len(set(fields))
    unset = {f.name for f in dataclasses.fields(PolicyThresholds)} - set(fields)
    assert unset == {"escalate_low", "escalate_high", "model_clears_below"}


def test_levels_get_stricter_in_order_and_every_level_is_a_valid_policy() -> None:
    """Each step up never raises a threshold, and each level alone loads over the defaults."""
    for category in SHIPPED_LEVELS.categories.values():
        present = [level for level in LEVELS if level in category.levels]
        for looser, stricter in itertools.pairwise(present):
            for field in category.fields:
                assert category.levels[looser][field] >= category.levels[stricter][field]
        for level in present:
            got = parse_policy(f'[levels]\n{category.name} = "{level}"\n', BASE)
            for field, value in category.levels[level].items():
                assert getattr(got, field) == value


def test_only_the_severe_categories_lack_off_and_off_is_the_never_threshold() -> None:
    """``off`` is 1.0 on every field of a non-severe category; the severe ones have none."""
    for name, category in SHIPPED_LEVELS.categories.items():
        assert category.severe == (name in SEVERE)
        if category.severe:
            assert OFF not in category.levels
            assert is_severe(name)
        else:
            assert set(category.levels[OFF].values()) == {OFF_THRESHOLD}


_GOOD = """
[provenance]
source = "a test"
licence = "Apache-2.0"
purpose = "a test"

[categories.spam]
what = "P(spam)"
off = { flag_spam = 1.0 }
low = { flag_spam = 0.8 }
medium = { flag_spam = 0.65 }
high = { flag_spam = 0.5 }
maximum = { flag_spam = 0.35 }
"""


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("high = { flag_spam = 0.5 }", "high = { flag_spam = 0.9 }"), "out of order"),
        (("maximum = { flag_spam = 0.35 }\n", ""), "lacks the levels ['maximum']"),
        (("off = { flag_spam = 1.0 }\n", ""), "lacks the level 'off'"),
        (("high = { flag_spam = 0.5 }", "high = { block_spam = 0.5 }"), "other fields"),
        (("medium = { flag_spam = 0.65 }", "medium = { flag_spam = 1.5 }"), "in [0, 1]"),
        (("what = ", "extreme = 1\nwhat = "), "unknown keys ['extreme']"),
        (("categories.spam", "categories.threat"), "a severe category has no 'off'"),
        (("flag_spam", "flag_spamm"), "'flag_spamm' is not a flag or block threshold"),
    ],
)
def test_a_levels_table_that_cannot_work_is_refused(
    tmp_path: Path, change: tuple[str, str], problem: str
) -> None:
    """The loader refuses a table out of order, with a level missing, with fields differing
    between levels, a number out of range, an unknown key, ``off`` on a severe category or a
    field that is no threshold."""
    path = tmp_path / "levels.toml"
    path.write_text(_GOOD.replace(*change), encoding="utf-8")
    with pytest.raises(DataFileError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        read_strictness_table(read_data_file(path))


def test_a_table_that_leaves_a_threshold_without_category_is_refused(tmp_path: Path) -> None:
    """Every flag and block threshold must be reachable by a level."""
    path = tmp_path / "levels.toml"
    path.write_text(_GOOD, encoding="utf-8")
    with pytest.raises(DataFileError, match="no category sets"):
        read_strictness_table(read_data_file(path))


# -- a policy file's levels and thresholds -------------------------------------------------


def test_explicit_thresholds_win_over_the_level_and_the_level_fills_the_rest() -> None:
    """``low`` sets offensive's flag and block; an explicit flag replaces the level's flag only;
    a category the file leaves out keeps the configured base."""
    base = dataclasses.replace(BASE, flag_spam=0.7)
    low = SHIPPED_LEVELS.categories["offensive"].levels["low"]
    got = parse_policy('[levels]\noffensive = "low"\n\n[thresholds]\nflag_offensive = 0.72\n', base)
    assert got.flag_offensive == 0.72
    assert got.block_offensive == low["block_offensive"]
    assert got.flag_spam == 0.7
    # the order of the tables in the file does not matter
    flipped = '[thresholds]\nflag_offensive = 0.72\n\n[levels]\noffensive = "low"\n'
    assert parse_policy(flipped, base) == got


def test_an_explicit_flag_above_its_levels_block_is_refused() -> None:
    """The level and the explicit threshold are checked together: ``maximum`` blocks offensive
    at its block threshold, so an explicit flag above it cannot work."""
    block = SHIPPED_LEVELS.categories["offensive"].levels["maximum"]["block_offensive"]
    text = f'[levels]\noffensive = "maximum"\n[thresholds]\nflag_offensive = {block + 0.01}\n'
    with pytest.raises(PolicyFileError, match="flag_offensive must not exceed block_offensive"):
        parse_policy(text, BASE)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[levels]\noffensive = "extreme"\n', "'extreme' is not a level"),
        ('[levels]\nprofanity = "low"\n', "'profanity' is not a category"),
        ("[levels]\noffensive = 2\n", "offensive must be a level name"),
        ("levels = 1\n", "[levels] must be a table"),
        ('[levels]\nthreat = "off"\n', "threat cannot be 'off'"),
        ('[levels]\nself_harm = "off"\n', "self_harm cannot be 'off'"),
        ("[thresholds]\nflag_threat = 0.9\n", "flag_threat = 0.9 is above"),
        ("[thresholds]\nflag_self_harm = 1.0\n", "flag_self_harm = 1 is above"),
        ('[levels]\noffensive = "low"\n[thresholds]\nflag_offensive = "high"\n', "a number"),
        ('[levels]\noffensive = "low"\n[thresholds]\nflag_offensive = 1.5\n', "in [0, 1]"),
        ("# only a comment\n", "no [levels] or [thresholds] table"),
        ('[level]\noffensive = "low"\n', "unknown table or key 'level'"),
    ],
)
def test_a_bad_level_or_threshold_is_refused_naming_it(text: str, problem: str) -> None:
    """Unknown levels and categories, a level that is not a string, ``off`` for a severe
    category, a severe threshold above its ``low`` level, a bad number, no table."""
    with pytest.raises(PolicyFileError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(text, BASE)


def test_a_severe_category_may_be_low_but_no_less() -> None:
    """``low`` is the ceiling: the level itself and an explicit threshold at it load."""
    ceiling = SHIPPED_LEVELS.ceiling("flag_threat")
    assert ceiling is not None
    assert parse_policy('[levels]\nthreat = "low"\n', BASE).flag_threat == ceiling
    assert parse_policy(f"[thresholds]\nflag_threat = {ceiling}\n", BASE).flag_threat == ceiling
    assert SHIPPED_LEVELS.ceiling("flag_offensive") is None


def test_render_keeps_the_levels_and_reads_back_the_same_policy() -> None:
    """A proposal written with the live file's levels gives what the levels and its thresholds
    give together."""
    text = render_policy({"flag_hate": 0.6}, levels={"offensive": "high", "spam": OFF})
    document = read_policy(text)
    assert dict(document.levels) == {"offensive": "high", "spam": OFF}
    got = parse_policy(text, BASE)
    assert got.flag_hate == 0.6
    assert got.flag_spam == OFF_THRESHOLD
    assert (
        got.flag_offensive
        == SHIPPED_LEVELS.categories["offensive"].levels["high"]["flag_offensive"]
    )


def test_category_lines_name_the_level_and_the_explicit_fields() -> None:
    """What ``policy check`` prints: the file's level, else the level the numbers equal."""
    text = '[levels]\noffensive = "low"\n[thresholds]\nflag_offensive = 0.75\nflag_hate = 0.5\n'
    document = read_policy(text)
    lines = {line.category: line for line in category_lines(document, parse_policy(text, BASE))}
    assert (lines["offensive"].level, lines["offensive"].named) == ("low", True)
    assert lines["offensive"].explicit == {"flag_offensive"}
    assert lines["offensive"].thresholds["flag_offensive"] == 0.75
    assert (lines["hate"].level, lines["hate"].named) == ("custom", False)
    assert (lines["hate"].level, lines["spam"].level) == ("custom", "medium")
    assert lines["hate"].explicit == {"flag_hate"}


# -- what off does to a decision ------------------------------------------------------------


def _off(*categories: str) -> PolicyThresholds:
    levels = "\n".join(f'{c} = "off"' for c in categories)
    return parse_policy(f"[levels]\n{levels}\n", BASE)


def test_off_never_flags_or_blocks_even_at_certainty() -> None:
    """At probability 1.0 the default blocks; with the category off the model says nothing."""
    certain = _scores(offensive=1.0)
    assert decide(RuleOutcome(), certain, BASE).decision is Decision.BLOCK
    got = decide(RuleOutcome(), certain, _off("offensive", "hate"))
    assert (got.decision, got.escalate) == (Decision.ALLOW, False)
    hateful = _scores(hate=1.0)
    assert decide(RuleOutcome(), hateful, _off("hate")).decision is Decision.BLOCK  # offensive
    got = decide(RuleOutcome(), hateful, _off("offensive", "hate"))
    assert (got.decision, got.escalate) == (Decision.ALLOW, False)


def test_off_stops_the_grey_zone_and_severe_hate_escalations() -> None:
    """Grey-zone offensive and severe hate escalate under the defaults, not when off."""
    grey = _scores(offensive=0.7)
    assert decide(RuleOutcome(), grey, BASE).escalate
    assert not decide(RuleOutcome(), grey, _off("offensive")).escalate
    severe_hate = _scores(hate=0.9)
    assert decide(RuleOutcome(), severe_hate, _off("offensive")).escalate
    assert not decide(RuleOutcome(), severe_hate, _off("offensive", "hate")).escalate


def test_off_insult_leaves_the_grey_zone_to_toxicity() -> None:
    """With insult off the grey zone reads ``toxic`` again, however large the insult."""
    scores = _scores(offensive=0.7, harms={"insult": 0.9})
    got = decide(RuleOutcome(), scores, _off("insult"))
    assert got.decision is Decision.FLAG
    assert "grey_zone:toxicity=0.700" in got.reasons
    assert not any(r.startswith("harms.insult") for r in got.reasons)


def test_rule_hits_of_an_off_category_keep_their_rules_actions() -> None:
    """``off`` is the model's: an offensive flag rule still flags, a block rule still blocks."""
    flag = RuleHit("r.flag", "offensive", Severity.MEDIUM, RuleAction.FLAG)
    block = RuleHit("r.block", "offensive", Severity.HIGH, RuleAction.BLOCK)
    off = _off("offensive", "insult")
    assert decide(RuleOutcome((flag,)), _scores(), off).decision is Decision.FLAG
    assert decide(RuleOutcome((block,)), _scores(), off).decision is Decision.BLOCK


def test_a_severe_harm_at_low_still_flags_and_escalates() -> None:
    """The least a tenant can ask of a threat still reaches a person."""
    low = parse_policy('[levels]\nthreat = "low"\n', BASE)
    at = SHIPPED_LEVELS.categories["threat"].levels["low"]["flag_threat"]
    got = decide(RuleOutcome(), _scores(harms={"threat": at}), low)
    assert (got.decision, got.escalate, got.category) == (Decision.FLAG, True, "threat")
    below = decide(RuleOutcome(), _scores(harms={"threat": at - 0.01}), low)
    assert below.decision is Decision.ALLOW


def _cell(values: dict[str, float] | None) -> str:
    if values is None:
        return "— (refused)"
    shown = {
        name.split("_", 1)[0]: "never" if value >= OFF_THRESHOLD else f"{value:g}"
        for name, value in values.items()
    }
    return f"{shown['flag']} / {shown.get('block', '—')}"


def test_the_documented_table_is_the_data_file() -> None:
    """docs/policy.md's table of levels says what pipelines/policy_levels.toml holds."""
    docs = Path(__file__).resolve().parents[3] / "docs" / "policy.md"
    rows = [
        line for line in docs.read_text(encoding="utf-8").splitlines() if line.startswith("| `")
    ]
    expected = [
        f"| `{c.name}` | "
        + " | ".join(
            _cell(dict(c.levels[level]) if level in c.levels else None) for level in LEVELS
        )
        + " |"
        for c in SHIPPED_LEVELS.categories.values()
    ]
    assert rows[: len(expected)] == expected
