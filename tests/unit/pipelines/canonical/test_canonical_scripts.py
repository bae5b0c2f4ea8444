"""Tests for pipelines.canonical.scripts: the character classes the stages share."""

from __future__ import annotations

from pipelines.canonical.scripts import has_han, is_han, is_latin_letter


def test_is_han() -> None:
    """Ideographs (BMP, compatibility and extension B) are Han; kana, Latin, digits are not."""
    assert is_han("\u50bb")
    assert is_han("\uf900")
    assert is_han("\U00020000")
    assert not is_han("\u3042")  # hiragana a
    assert not is_han("a")
    assert not is_han("1")


def test_has_han() -> None:
    """Mixed text with one ideograph has Han; ASCII and Cyrillic text has none."""
    assert has_han("hello \u4f60")
    assert not has_han("hello")
    assert not has_han("\u043f\u0440\u0438\u0432\u0435\u0442")


def test_is_latin_letter() -> None:
    """ASCII, accented and IPA letters are Latin; Greek, Cyrillic, digits and Han are not."""
    assert is_latin_letter("a")
    assert is_latin_letter("\u00e9")
    assert is_latin_letter("\u0251")  # IPA alpha
    assert not is_latin_letter("\u03b1")  # Greek alpha
    assert not is_latin_letter("\u0430")  # Cyrillic a
    assert not is_latin_letter("1")
    assert not is_latin_letter("\u4f60")
