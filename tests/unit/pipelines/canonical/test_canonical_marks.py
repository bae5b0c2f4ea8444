"""Tests for pipelines.canonical.marks: combining marks on Latin letters."""

from __future__ import annotations

import pytest

from pipelines.canonical.marks import strip_marks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("f\u00fcck", "fuck"),  # precomposed u with diaeresis
        ("fu\u0308ck", "fuck"),  # combining diaeresis
        ("f\u0336u\u0336c\u0336k\u0336", "fuck"),  # strike-through overlay
        ("s\u0301\u0302\u0303\u0304hit", "shit"),  # Zalgo-style stacking
        ("caf\u00e9", "cafe"),
    ],
)
def test_marks_on_latin_letters_are_removed(text: str, expected: str) -> None:
    """Diacritics and overlays on Latin letters disappear."""
    assert strip_marks(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "\u0928\u092e\u0938\u094d\u0924\u0947",  # Devanagari vowel signs and virama are Mn marks
        "\u4f60\u597d",
        "plain",
        "\u0439",  # Cyrillic short i keeps its breve: it is not Latin
    ],
)
def test_other_scripts_keep_their_marks(text: str) -> None:
    """Marks that belong to non-Latin letters are kept."""
    assert strip_marks(text) == text
