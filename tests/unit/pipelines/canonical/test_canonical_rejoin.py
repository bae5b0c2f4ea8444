"""Tests for pipelines.canonical.rejoin: split letters and characters joined back."""

from __future__ import annotations

import pytest

from pipelines.canonical.rejoin import rejoin


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("f u c k you", "fuck you"),
        ("f.u.c.k", "fuck"),
        ("f-u-c-k off", "fuck off"),
        ("f_u_c_k", "fuck"),
        ("f\U0001f92cu\U0001f92cc\U0001f92ck", "fuck"),  # emoji between the letters
        ("k.y.s", "kys"),
        ("\u50bb \u903c", "\u50bb\u903c"),
        ("\u50bb*\u903c", "\u50bb\u903c"),
        ("\u50bb.\u903c", "\u50bb\u903c"),
        ("\u6211 \u8981 \u6740 \u4e86 \u4f60", "\u6211\u8981\u6740\u4e86\u4f60"),
    ],
)
def test_split_words_are_joined(text: str, expected: str) -> None:
    """Single letters or Han characters split by separators read as one word."""
    assert rejoin(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "see you at 5",
        "u r a good friend",  # three spaced letters: ordinary texting
        "i am a cat",
        "e.g. this",  # two letters only
        "a, b, c",  # commas separate real items
        "1 - 2 - 3",  # digits are not letters
        "\u4f60\u597d, \u4e16\u754c",  # a comma between clauses is kept
        "ab cd ef",
    ],
)
def test_ordinary_text_stays_apart(text: str) -> None:
    """Words longer than one letter, short spaced runs and clause punctuation are kept."""
    assert rejoin(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\u6709\u610f\u8005+\u8587", "\u6709\u610f\u8005\u52a0\u8587"),  # 有意者+薇
        ("\u8be6\u60c5+v", "\u8be6\u60c5\u52a0v"),  # 详情+v
        ("\u60f3\u8981\u2795q", "\u60f3\u8981\u52a0q"),  # emoji plus
    ],
)
def test_plus_before_a_contact_handle_reads_add(text: str, expected: str) -> None:
    """Contact spam writes 加 ("add") as a plus sign; it is read, not dropped."""
    assert rejoin(text) == expected


@pytest.mark.parametrize(
    "text", ["1+1\u7b49\u4e8e\u51e0", "c++\u5f88\u96be", "+vip\u4f1a\u5458", "a+v"]
)
def test_other_plus_signs_are_untouched(text: str) -> None:
    """Sums, c++, a plus before other words and Latin text keep their plus sign."""
    assert rejoin(text) == text
