"""Tests for pipelines.canonical.leet: leetspeak readings and masks."""

from __future__ import annotations

import pytest

from pipelines.canonical.leet import leet_readings, mask_fits


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("sh1t happens", "shit happens"),
        ("you a$$", "you ass"),
        ("f4gg0t", "faggot"),
        ("b!tch", "bitch"),
        ("what a sh1t!", "what a shit!"),  # a trailing ! is punctuation
        ("7w@7", "twat"),
        ("1d10t", "idiot"),
        ("n1663r", "nigger"),  # 6 and 9 read as g, 8 as b
        ("9ay", "gay"),
        ("8itch", "bitch"),
    ],
)
def test_leet_tokens_read_as_letters(text: str, reading: str) -> None:
    """A token mixing letters with digits or symbols gets a letter reading."""
    assert reading in leet_readings(text).texts


def test_one_and_bang_also_read_as_l() -> None:
    """``1`` and ``!`` are ambiguous: a second reading takes them as ``l``."""
    assert leet_readings("k1ll").texts == ("kill", "klll")
    assert "kill" in leet_readings("ki11").texts


@pytest.mark.parametrize(
    "text",
    [
        "costs $25",
        "call 13812345678",
        "hello there",
        "good game!",
        "100% sure",
        "5 $",
        "8:69 pm",
        "see you at 8am on the 6th",
        "5g and 4k",
        "add me: player123",
        "\u751f\u65e5\u5feb\u4e50!\u795d\u4f60",
    ],
)
def test_tokens_without_letters_or_leet_get_no_reading(text: str) -> None:
    """Prices, numbers, plain words and sentence punctuation give no readings at all."""
    readings = leet_readings(text)
    assert readings.texts == ()
    assert readings.masks == ()


@pytest.mark.parametrize(("text", "reading"), [("b4 the game", "ba the game"), ("l33t", "leet")])
def test_harmless_readings_are_only_candidates(text: str, reading: str) -> None:
    """``b4`` or ``l33t`` get a reading, which matters only if it spells a keyword."""
    assert reading in leet_readings(text).texts


def test_masks_are_collected_separately() -> None:
    """``*`` tokens with at least two visible letters are masks; ``f***`` is too vague."""
    assert leet_readings("f*ck off").masks == ("f*ck",)
    assert leet_readings("what the f**k").masks == ("f**k",)
    assert leet_readings("sh*t").masks == ("sh*t",)
    assert leet_readings("f*** this").masks == ()
    assert leet_readings("2*3=6").masks == ()


@pytest.mark.parametrize(
    ("mask", "word", "fits"),
    [
        ("f*ck", "fuck", True),
        ("f**k", "fuck", True),
        ("f*ck", "fork", False),
        ("f*ck", "fucks", False),
        ("sh*t", "shot", True),  # the matcher only offers lexicon words
        ("*ss", "ass", True),
        ("f*ck", "f2ck", False),
    ],
)
def test_mask_fits(mask: str, word: str, fits: bool) -> None:
    """A mask fits a word of the same length agreeing on every visible letter."""
    assert mask_fits(mask, word) is fits


def test_emoji_between_letters_is_a_mask_but_not_at_the_ends() -> None:
    """``f🖕ck`` is masked like ``f*ck``; an emoji after a word is decoration."""
    assert leet_readings("f\U0001f595ck you").masks == ("f*ck",)
    assert leet_readings("sh\U0001f4a9t").masks == ("sh*t",)
    assert leet_readings("thanks\U0001f64f love\u2764\ufe0f") == leet_readings("thanks love")
