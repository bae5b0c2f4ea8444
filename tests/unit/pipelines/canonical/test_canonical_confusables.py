"""Tests for pipelines.canonical.confusables: look-alike letters inside Latin words."""

from __future__ import annotations

import pytest

from pipelines.canonical.confusables import confusable_table, fold_confusables


def test_table_comes_from_the_tr39_data() -> None:
    """The table maps Cyrillic, Greek and IPA look-alikes to ASCII and holds no ASCII keys."""
    table = confusable_table()
    assert table["\u0430"] == "a"  # Cyrillic a
    assert table["\u03bf"] == "o"  # Greek omicron
    assert table["\u0251"] == "a"  # IPA alpha
    assert len(table) > 500
    assert not any(key.isascii() for key in table)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("f\u03c5ck", "fuck"),  # Greek upsilon
        ("\u0455hit happens", "shit happens"),  # Cyrillic dze
        ("f\u0251ggot", "faggot"),  # IPA alpha
        ("p\u0430yp\u0430l login", "paypal login"),  # Cyrillic a twice
        ("\u0455\u0435\u0445\u0443 pics here", "sexy pics here"),  # all Cyrillic, Latin message
    ],
)
def test_lookalikes_in_latin_words_are_folded(text: str, expected: str) -> None:
    """A Latin word with look-alike letters, or a look-alike word in Latin text, reads Latin."""
    assert fold_confusables(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "\u043f\u0440\u0438\u0432\u0435\u0442 \u043a\u0430\u043a \u0434\u0435\u043b\u0430",
        "\u0441\u0443\u043a\u0430 \u0431\u043b\u044f\u0442\u044c",
        "\u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03c6\u03af\u03bb\u03b5",
        "\u0441\u043e\u043a ok",  # one Russian word (all look-alikes) against one Latin word
        "plain ascii words",
        "\u4f60\u597d world",
    ],
)
def test_genuine_greek_russian_and_other_text_is_kept(text: str) -> None:
    """Russian and Greek words, and text without look-alikes, are returned unchanged."""
    assert fold_confusables(text) == text


def test_a_whole_sentence_of_look_alikes_is_folded() -> None:
    """A message typed entirely in Cyrillic look-alikes reads as the Latin it imitates; real
    Russian or Greek text has letters no Latin letter looks like and is kept."""
    assert fold_confusables("\u0455\u0435\u0445\u0443 \u0441\u043e\u0440\u0443") == "sexy copy"
    assert fold_confusables("\u0441\u0443\u043a\u0430 \u0431\u043b\u044f\u0442\u044c") == (
        "\u0441\u0443\u043a\u0430 \u0431\u043b\u044f\u0442\u044c"
    )
    assert fold_confusables("\u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1") == (
        "\u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1"
    )
