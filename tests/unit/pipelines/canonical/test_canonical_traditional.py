"""Tests for pipelines.canonical.traditional: Traditional to Simplified Chinese."""

from __future__ import annotations

from pipelines.canonical.traditional import to_simplified


def test_traditional_characters_become_simplified() -> None:
    """Traditional spellings of abuse words and ordinary words read Simplified."""
    assert to_simplified("\u8349\u6ce5\u99ac") == "\u8349\u6ce5\u9a6c"  # grass-mud horse
    assert to_simplified("\u4ed6\u5abd\u7684") == "\u4ed6\u5988\u7684"
    assert to_simplified("\u8aaa\u8a71") == "\u8bf4\u8bdd"


def test_simplified_and_latin_text_are_unchanged() -> None:
    """Simplified Chinese and text without Han characters are returned as they are."""
    assert to_simplified("\u6211\u4eec\u53bb\u516c\u56ed") == "\u6211\u4eec\u53bb\u516c\u56ed"
    assert to_simplified("no chinese here") == "no chinese here"
