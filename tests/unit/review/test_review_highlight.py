"""Tests for review.highlight: the message text cut at the rule hits' spans."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

import review.console
from pipelines.attribution import AttributionError
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


WORDS = {"output": "toxicity.hate", "spans": [{"span": [5, 12], "drop": 0.61}]}


def test_model_spans_mark_their_words_beside_the_rules() -> None:
    """The words that moved the model are marked with their drop, apart from the rules' marks;
    where both cover a piece, the piece carries both."""
    text = "well f.u.c.k y0u"
    hits = [{"rule_id": "kw", "spans": [[5, 16]]}]
    assert highlight(text, [], WORDS) == [
        Piece("well "),
        Piece("f.u.c.k", (), 0.61),
        Piece(" y0u"),
    ]
    assert highlight(text, hits, WORDS) == [
        Piece("well "),
        Piece("f.u.c.k", ("kw",), 0.61),
        Piece(" y0u", ("kw",)),
    ]
    assert highlight(text, hits, None) == highlight(text, hits)


def test_model_spans_that_are_not_offsets_are_refused() -> None:
    with pytest.raises(AttributionError):
        highlight("abc", [], {"output": "toxicity.hate", "spans": [{"span": [2, 1], "drop": 1}]})


def _message_block(pieces: list[Piece], model_spans: Mapping[str, object] | None) -> str:
    """The item page's message text and legends, rendered from the template's own lines."""
    source = (Path(review.console.__file__).parent / "templates" / "item.html").read_text()
    start = source.index('  <blockquote class="toxic"')
    end = source.index("  {% else %}", start)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    ctx = SimpleNamespace(verdict=SimpleNamespace(model_spans=model_spans))
    return env.from_string(source[start:end]).render(pieces=pieces, ctx=ctx)


def test_the_console_marks_model_words_in_their_own_style() -> None:
    html = _message_block(highlight("well f.u.c.k y0u", [], WORDS), WORDS)
    assert '<mark class=" model" title="model drop 0.61">f.u.c.k</mark>' in html
    assert 'id="model-legend"' in html
    assert "toxicity.hate" in html
    assert 'id="hit-legend"' not in html
    whole = {"output": "toxicity.hate", "spans": [{"span": [0, 7], "drop": 0.61}]}
    both = _message_block(
        highlight("f.u.c.k", [{"rule_id": "kw", "spans": [[0, 7]]}], whole), whole
    )
    assert '<mark class="hit model" title="kw · model drop 0.61">f.u.c.k</mark>' in both
    plain = _message_block(highlight("f.u.c.k", [{"rule_id": "kw", "spans": [[0, 7]]}]), None)
    assert '<mark class="hit" title="kw">f.u.c.k</mark>' in plain
    assert 'id="model-legend"' not in plain
