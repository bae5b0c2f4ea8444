"""Tests for pipelines.policy_file: the policy file's one table, what it refuses, and writing
it back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipelines.policy import PolicyThresholds
from pipelines.policy_file import (
    THRESHOLD_FIELDS,
    PolicyFileError,
    load_policy_file,
    parse_policy,
    render_policy,
)

BASE = PolicyThresholds()


def test_keys_the_file_sets_replace_the_base_and_the_rest_keep_it() -> None:
    """``[thresholds]`` values win; fields the file leaves out keep the configured base."""
    base = dataclasses.replace(BASE, block_spam=0.99)
    got = parse_policy("[thresholds]\nflag_hate = 0.5\nflag_spam = 0.8\n", base)
    assert (got.flag_hate, got.flag_spam) == (0.5, 0.8)
    assert got.block_spam == 0.99
    assert got.block_hate == BASE.block_hate


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[thresholds\nflag_hate = 0.5", "not TOML"),
        ("flag_hate = 0.5\n", "unknown table or key 'flag_hate'"),
        ("[policy]\nflag_hate = 0.5\n", "unknown table or key 'policy'"),
        ("[thresholds]\nflag_hat = 0.5\n", "'flag_hat' is not a threshold"),
        ("[thresholds]\nflag_hate = '0.5'\n", "flag_hate must be a number"),
        ("[thresholds]\nflag_hate = true\n", "flag_hate must be a number"),
        ("[thresholds]\nflag_hate = 1.5\n", "flag_hate must be a number in [0, 1]"),
        ("[thresholds]\nflag_hate = nan\n", "flag_hate must be a number in [0, 1]"),
        ("[thresholds]\nflag_hate = 0.9\nblock_hate = 0.8\n", "must not exceed block_hate"),
        ("", "no [levels] or [thresholds] table"),
    ],
)
def test_a_file_that_cannot_work_is_refused_with_its_problem(text: str, problem: str) -> None:
    """Bad TOML, another table, a typo, a non-number or thresholds that cannot work together
    are refused, naming the problem."""
    with pytest.raises(PolicyFileError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(text, BASE)


def test_render_reads_back_the_same_thresholds(tmp_path: Path) -> None:
    """What ``render_policy`` writes, ``load_policy_file`` reads back exactly, comments and
    all fields included."""
    chosen = dataclasses.replace(BASE, flag_hate=0.123456789, block_spam=0.9876543210123)
    values = dataclasses.asdict(chosen)
    assert set(values) == set(THRESHOLD_FIELDS)
    path = tmp_path / "policy.toml"
    path.write_text(render_policy(values, comments=["calibrated\nsince 30d"]), encoding="utf-8")
    assert path.read_text(encoding="utf-8").startswith("# calibrated\n# since 30d\n")
    assert load_policy_file(path, PolicyThresholds(flag_hate=0.2)) == chosen


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    """A missing file is a PolicyFileError naming the path (never an OSError escaping)."""
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy_file(tmp_path / "absent.toml", BASE)


def test_render_refuses_what_is_not_a_threshold() -> None:
    """Writing an unknown key or an infinite value fails before anything is written."""
    with pytest.raises(PolicyFileError):
        render_policy({"flag_hat": 0.5})
    with pytest.raises(PolicyFileError):
        render_policy({"flag_hate": float("inf")})
