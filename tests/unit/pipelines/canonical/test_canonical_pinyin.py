"""Tests for pipelines.canonical.pinyin: pinyin readings of messages and keywords."""

from __future__ import annotations

import pytest

from pipelines.canonical.pinyin import (
    NO_PINYIN,
    char_syllable,
    dictionary_readings,
    fuzzy,
    is_syllable,
    keyword_forms,
    pinyin_reading,
)

SHABI = "\u50bb\u903c"  # the abuse word
SHABI_HOMOPHONE = "\u715e\u7b14"  # same pinyin, other characters


def test_char_syllable_is_toneless_first_reading() -> None:
    """Characters read as their first pronunciation without tones; u-umlaut is written v."""
    assert char_syllable("\u50bb") == "sha"
    assert char_syllable("\u5973") == "nv"
    assert char_syllable("\u7684") == "de"
    assert char_syllable("a") == ""


@pytest.mark.parametrize(
    ("syllable", "folded"),
    [("shi", "si"), ("zhang", "zan"), ("chi", "ci"), ("bing", "bin"), ("ma", "ma"), ("si", "si")],
)
def test_fuzzy_folds_near_homophones(syllable: str, folded: str) -> None:
    """zh/ch/sh and -ang/-eng/-ing fold onto their near-homophones."""
    assert fuzzy(syllable) == folded


def test_homophones_share_a_reading() -> None:
    """The abuse word and its homophone spelled with other characters read the same."""
    assert pinyin_reading(SHABI).codes == pinyin_reading(SHABI_HOMOPHONE).codes
    assert pinyin_reading(SHABI).syllables == ("sa", "bi")
    assert pinyin_reading(SHABI_HOMOPHONE).sources == SHABI_HOMOPHONE


def test_reading_breaks_at_words_that_are_not_pinyin() -> None:
    """A Latin word that is not a syllable, or punctuation, breaks the syllable run."""
    assert pinyin_reading("\u50bb hello \u903c").syllables == ("sa", "", "bi")
    assert pinyin_reading("\u4f60 ni ma").syllables == ("ni", "ni", "ma")


def test_text_without_han_has_no_reading() -> None:
    """English text, even of pinyin-looking words such as she, man and bin, is not read."""
    assert pinyin_reading("she man bin") is NO_PINYIN
    assert pinyin_reading("shabi") is NO_PINYIN


def test_is_syllable() -> None:
    """Pinyin syllables are recognised; vowel-less strings and English words are not."""
    assert is_syllable("she")
    assert is_syllable("zhuang")
    assert not is_syllable("sb")
    assert not is_syllable("hello")


def test_keyword_forms() -> None:
    """A Han keyword gets its syllables, spelling and initials at load time."""
    forms = keyword_forms(SHABI)
    assert forms is not None
    assert forms.syllables == ("sa", "bi")
    assert forms.spellings == ("shabi",)
    assert forms.initials == "sb"
    assert forms.codes == pinyin_reading(SHABI).codes
    nmsl = keyword_forms("\u4f60\u5988\u6b7b\u4e86")
    assert nmsl is not None
    assert nmsl.initials == "nmsl"


@pytest.mark.parametrize("keyword", ["\u50bbb", "\u50bb", "fuck", "\u52a0vx"])
def test_keyword_forms_need_two_han_characters_only(keyword: str) -> None:
    """Mixed, single-character and Latin keywords get no pinyin forms."""
    assert keyword_forms(keyword) is None


def test_dictionary_readings_find_ordinary_words() -> None:
    """The phrase dictionary knows an ordinary word that reads like an abuse word."""
    forms = keyword_forms("\u8d31\u4eba")  # jian ren, "slut"
    assert forms is not None
    assert "\u517c\u4efb" in dictionary_readings()[forms.codes]  # jian ren, "hold two posts"
