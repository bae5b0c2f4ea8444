"""Tests for pipelines.canonical.emoji_words: emoji written for a Chinese character."""

from __future__ import annotations

import pytest

from pipelines.canonical import canonicalize
from pipelines.canonical.emoji_words import EMOJI_HAN, read_emoji_words
from pipelines.canonical.rejoin import rejoin
from pipelines.canonical.scripts import is_han


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你是\U0001f437吧", "你是猪吧"),  # pig between Han characters
        ("你\U0001f434没了", "你马没了"),  # horse: the pun on 妈 is the pinyin reading's job
        ("\U0001f33f泥\U0001f434的", "草泥马的"),  # at the start, touching Han on the right
        ("笑\U0001f480", "笑死"),  # at the end, touching Han on the left
        ("笑\U0001f480\ufe0f了", "笑死了"),  # variation selector dropped with it
        ("\U0001f437\U0001f437你好", "猪猪你好"),  # a run of them, read from the Han side
    ],
)
def test_word_emoji_next_to_han_are_read(text: str, expected: str) -> None:
    """A listed emoji touching Han text becomes the character it stands for."""
    assert read_emoji_words(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "i love my \U0001f436",  # Latin text: left alone
        "\U0001f436",  # alone
        "傻\U0001f525逼",  # a separator emoji is not listed (rejoin drops it)
        "好吃 \U0001f437",  # a space between: not touching
        "hello \U0001f480 world",
    ],
)
def test_other_emoji_are_left_alone(text: str) -> None:
    """Unlisted emoji, Latin text and emoji apart from Han text are unchanged."""
    assert read_emoji_words(text) == text


def test_separator_emoji_still_join_split_characters() -> None:
    """The stage runs before ``rejoin``, which still removes separator emoji."""
    assert rejoin(read_emoji_words("傻\U0001f525逼")) == "傻逼"
    assert canonicalize("傻\U0001f4a5逼").text == "傻逼"


def test_canonical_text_reads_the_word_and_rules_hear_the_pun() -> None:
    """Through ``canonicalize``: the model gets the character, the pinyin reading the pun."""
    assert canonicalize("你\U0001f434没了").text == "你马没了"
    assert canonicalize("等\U0001f480吧").text == "等死吧"


def test_every_listed_emoji_maps_to_han() -> None:
    """The table's values are Han characters only (what the next stages expect)."""
    assert EMOJI_HAN
    assert all(value and all(is_han(c) for c in value) for value in EMOJI_HAN.values())
