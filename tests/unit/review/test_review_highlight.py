"""Tests for review.highlight: the message text cut at the rule hits' spans."""

from __future__ import annotations

import pytest

from pipelines.rule_hits import RuleHitError
from review.highlight import Piece, highlight


def test_spans_mark_the_pieces_they_cover() -> None:
    """Each span's characters are one marked piece, the rest plain, all in order."""
    text = "well f.u.c.k y0u then"
    hits = [{"rule_id": "kw", "spans": [[5, 16]]}]
    assert highlight(text, hits) == [Piece("well "), Piece("f.u.c.k y0u", ("kw",)), Piece(" then")]


def test_overlapping_hits_name_every_rule() -> None:
    """Where two rules' spans overlap, the piece names both."""
    hits = [{"rule_id": "a", "spans": [[0, 4]]}, {"rule_id": "b", "spans": [[2, 6]]}]
    assert highlight("abcdefg", hits) == [
        Piece("ab", ("a",)),
        Piece("cd", ("a", "b")),
        Piece("ef", ("b",)),
        Piece("g"),
    ]


def test_hits_without_spans_and_spans_past_the_end() -> None:
    """Old hits (no spans) mark nothing; a span past the text's end is cut to it."""
    assert highlight("abc", [{"rule_id": "old"}]) == [Piece("abc")]
    assert highlight("abc", [{"rule_id": "r", "spans": [[1, 9]]}]) == [
        Piece("a"),
        Piece("bc", ("r",)),
    ]
    assert highlight("", [{"rule_id": "r", "spans": [[1, 9]]}]) == []


def test_offsets_count_code_points() -> None:
    """Offsets are code points: an emoji before the span does not shift it."""
    text = "\U0001f600 傻逼"
    assert highlight(text, [{"rule_id": "zh", "spans": [[2, 4]]}])[-1] == Piece("傻逼", ("zh",))


def test_spans_that_are_not_offsets_are_refused() -> None:
    """A stored span that is not a pair of offsets is a typed error."""
    with pytest.raises(RuleHitError):
        highlight("abc", [{"rule_id": "r", "spans": [["a", "b"]]}])
