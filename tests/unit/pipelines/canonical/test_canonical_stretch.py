"""Tests for pipelines.canonical.stretch: letters stretched past two read once."""

from __future__ import annotations

import pytest

from pipelines.canonical import canonicalize
from pipelines.canonical.stretch import unstretched


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("kiiiiiill yourselfffff", "kill yourself"),
        ("shiiiit", "shit"),
        ("KYYYYS", "KYS"),
        ("sooooo good", "so good"),  # a pair is left alone
    ],
)
def test_runs_of_three_or_more_letters_read_once(text: str, reading: str) -> None:
    """Each run of three or more identical letters is written once; pairs stay."""
    assert unstretched(text) == reading


@pytest.mark.parametrize(
    "text", ["good call", "kill the boss", "13888888888", "!!!", "hello", "see www.example.com"]
)
def test_text_without_stretched_letters_has_no_reading(text: str) -> None:
    """Pairs, digit runs (ids, phone numbers) and punctuation give no reading."""
    assert unstretched(text) is None


def test_canonical_text_carries_the_reading_for_matching_only() -> None:
    """The base text keeps normalisation's two-letter squeeze; the reading is an alternative."""
    canonical = canonicalize("kiiiiiill yourselfffff")
    assert canonical.text == "kiill yourselff"
    assert "kill yourself" in canonical.leet
    assert canonicalize("assssss").text == "ass"  # a stretched pair still matches in the base
    assert canonicalize("good game").leet == ()
