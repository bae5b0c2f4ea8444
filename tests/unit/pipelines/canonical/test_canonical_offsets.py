"""Tests for pipelines.canonical.offsets: aligning a stage's input with its output, and maps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.canonical.offsets import OffsetError, OffsetMap, align


def _sources(before: str, after: str) -> list[str]:
    return [before[start:end] for start, end in align(before, after)]


def test_unchanged_text_maps_to_itself() -> None:
    """A stage that changed nothing maps every character onto itself."""
    assert align("abc", "abc") == [(0, 1), (1, 2), (2, 3)]


def test_case_and_full_width_line_up_character_by_character() -> None:
    """Folded case and full-width letters compare as their plain letters."""
    assert _sources("He\uff2c\uff2co", "hello") == ["H", "e", "\uff2c", "\uff2c", "o"]


def test_deleted_characters_are_skipped() -> None:
    """Characters a stage dropped (separators, zero-width) are in no output character's range."""
    assert _sources("f.u\u200bc-k", "fuck") == ["f", "u", "c", "k"]


def test_squeezed_run_maps_into_the_run() -> None:
    """A run squeezed to two keeps its first two characters' positions."""
    assert align("fuuuuck", "fuuck") == [(0, 1), (1, 2), (2, 3), (5, 6), (6, 7)]


def test_expansion_maps_every_piece_to_its_source() -> None:
    """A ligature expanded to two letters maps both to the ligature."""
    assert _sources("\ufb01ne", "fine") == ["\ufb01", "\ufb01", "n", "e"]


def test_uneven_replacement_maps_to_the_whole_piece() -> None:
    """A piece replaced by one of another length maps each new character to all of it."""
    assert _sources("a+vx", "a\u52a0vx") == ["a", "+", "v", "x"]
    assert _sources("xy\U0001f437\ufe0fz", "xy\u732az") == ["x", "y", "\U0001f437\ufe0f", "z"]


def test_text_from_nothing_is_refused() -> None:
    """A stage cannot produce characters from an empty input."""
    with pytest.raises(OffsetError):
        align("", "a")


def test_raw_span_covers_first_to_last_source() -> None:
    """A derived range maps to the raw range from its first source to its last."""
    mapping = OffsetMap.identity(7).through(align("f.u.c.k", "fuck"))
    assert mapping.raw_span(0, 4) == (0, 7)
    assert mapping.raw_span(1, 2) == (2, 3)


@pytest.mark.parametrize(("start", "end"), [(-1, 1), (0, 0), (2, 1), (0, 5)])
def test_raw_span_refuses_ranges_outside_the_text(start: int, end: int) -> None:
    """An empty, reversed or out-of-range span is a typed error, not a wrong answer."""
    with pytest.raises(OffsetError):
        OffsetMap.identity(4).raw_span(start, end)


def test_raw_spans_of_another_text_are_none() -> None:
    """A map asked about a text of another length gives no spans instead of wrong ones."""
    assert list(OffsetMap.identity(3).raw_spans("abcd", [(0, 2)])) == []


def test_repr_holds_no_text() -> None:
    """The map prints sizes only."""
    assert repr(OffsetMap.identity(3)) == "OffsetMap(<3 chars from 3>)"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_every_character_comes_from_inside_the_input(before: str, after: str) -> None:
    """Whatever the two texts, each output character maps to a non-empty range of the input."""
    if not before:
        return
    spans = align(before, after)
    assert len(spans) == len(after)
    assert all(0 <= start < end <= len(before) for start, end in spans)


def test_accents_composed_and_marks_dropped_stay_with_their_letter() -> None:
    """A letter composed with its accent, and a mark dropped after a letter, map to the letter
    and its mark."""
    assert _sources("c\u0301d", "\u0107d") == ["c\u0301", "d"]
    assert _sources("a\u200bd\u0301x", "dx") == ["d\u0301", "x"]


def test_traditional_characters_and_emoji_line_up() -> None:
    """A Traditional character lines up with its Simplified form, an emoji with the character
    it stands for, so their neighbours keep their own positions."""
    assert _sources("\u8aaa\u8a71", "\u8bf4\u8bdd") == ["\u8aaa", "\u8a71"]
    assert _sources("\u4f60\U0001f437\u5427", "\u4f60\u732a\u5427") == [
        "\u4f60",
        "\U0001f437",
        "\u5427",
    ]


@pytest.mark.timeout(30)
def test_a_long_disguised_message_is_aligned_in_linear_time() -> None:
    """Ten thousand characters of dotted letters align within the test's timeout (a general
    diff takes minutes on this), each letter to itself."""
    before = "f.u.c.k " * 1250
    after = "fuck " * 1250
    spans = align(before, after)
    assert len(spans) == len(after)
    assert [before[a:b] for a, b in spans[:5]] == ["f", "u", "c", "k", " "]
    assert spans[-1] == (len(before) - 1, len(before))
