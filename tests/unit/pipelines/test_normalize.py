"""Tests for pipelines.normalize: the canonical text form rules are matched against."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipelines.normalize import normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\uff26\uff32\uff25\uff25", "free"),  # full-width FREE
        ("\uff26\uff32\uff25\uff25 \uff2d\uff4f\uff4e\uff45\uff59", "free money"),
        ("Hello WORLD", "hello world"),
        ("Straße", "strasse"),
        ("\ufb01ne", "fine"),  # fi ligature
        ("\u2460", "1"),  # circled digit one
        ("f\u200bu\u200cc\u200dk", "fuck"),
        ("f\u2060u\ufeffck", "fuck"),
        ("fr\u202eee\u202c", "free"),
        ("a\u2066b\u2067c\u2068d\u2069", "abcd"),
        ("soft\u00adhyphen", "softhyphen"),
        ("bell\x07char\x1b", "bellchar"),
        ("fuuuuuck", "fuuck"),
        ("soooo goooood!!!!!", "soo good!!"),
        ("哈哈哈哈哈", "哈哈"),
        ("  many   spaces\t\tand\nlines  ", "many spaces and lines"),
        ("a\u3000b", "a b"),  # ideographic space
        ("I\u2019ll say \u201chi\u201d", 'i\'ll say "hi"'),
        ("加\uff1a微信\uff01", "加:微信!"),
        ("13888888888", "13888888888"),  # digit runs are data
        ("", ""),
        ("\u200b\u200b", ""),
    ],
)
def test_examples(raw: str, expected: str) -> None:
    """Known inputs normalise to the documented canonical form."""
    assert normalize(raw) == expected


def test_squeeze_keeps_two() -> None:
    """A run of exactly two identical characters is kept, three become two."""
    assert normalize("good") == "good"
    assert normalize("gooood") == "good"


def test_zero_width_removal_can_create_run_then_squeezed() -> None:
    """Zero-width characters hidden inside a run do not protect it from squeezing."""
    assert normalize("fu\u200bu\u200bu\u200buck") == "fuuck"


def test_decomposed_and_composed_agree() -> None:
    """Composed and decomposed accents give the same result (NFKC)."""
    assert normalize("cafe\u0301") == normalize("caf\u00e9") == "caf\u00e9"


@settings(max_examples=1000, deadline=None)
@given(st.text())
@example("e\u200b\u0301")
@example("\u0345\u0345\u0345")
@example("\ufdfa")
@example("ẞẞẞ")
@example("Σσς")
def test_idempotent(text: str) -> None:
    """normalize(normalize(x)) == normalize(x) for any string."""
    once = normalize(text)
    assert normalize(once) == once


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_output_invariants(text: str) -> None:
    """Output has no control/format characters, no edge or double spaces, no non-digit runs of 3."""
    out = normalize(text)
    assert out == out.strip()
    assert "  " not in out
    assert all(unicodedata.category(c) not in {"Cc", "Cf", "Cs"} for c in out)
    for i in range(len(out) - 2):
        assert not (out[i] == out[i + 1] == out[i + 2] and not out[i].isdigit())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=60))
def test_ascii_fast_path_matches_general_path(text: str) -> None:
    """ASCII text gets the same result as if it went through the full Unicode pipeline."""
    assert normalize(text) == normalize(text + "\u00e9")[:-1].rstrip()
