"""Tests for ``modstream rules check``: what a layer changes, its examples, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from modstream.cli import main
from tests.unit.pipelines.rules.layer_files import BASE, LAYER, write


def test_check_prints_each_change_and_what_the_rule_becomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "base.toml", BASE)
    assert main(["rules", "check", str(write(tmp_path, "acme.toml", LAYER))]) == 0
    out = capsys.readouterr().out
    assert "stack: base.toml > acme.toml" in out
    assert "  t.spam.words: disabled" in out
    assert "    action: 'flag' -> 'block'" in out
    assert "    becomes regex rule: threat, critical, block" in out
    assert "    min_strikes: 3 -> 5" in out
    assert "  acme.links: added" in out
    assert "examples: 3 checked, 0 failed" in out
    assert "engine: 4 rules (3 enabled), built in" in out


def test_check_fails_on_an_example_that_does_not_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An everyday line the stack hits is a failed example: exit 1, naming the rule."""
    write(tmp_path, "base.toml", BASE)
    layer = LAYER.replace("cheap pills are not a thing here", "i will hurt you")
    assert main(["rules", "check", str(write(tmp_path, "acme.toml", layer))]) == 1
    out = capsys.readouterr().out
    assert "example fails: layer acme.toml: rule 't.threat.words' hits everyday line" in out
    assert "examples: 3 checked, 1 failed" in out


def test_check_refuses_a_bad_layer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "base.toml", BASE)
    bad = write(tmp_path, "acme.toml", 'extends = "base.toml"\ndisable = ["t.gone"]')
    assert main(["rules", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "refused: layer acme.toml: rule 't.gone': cannot disable: no such rule below"
    )
