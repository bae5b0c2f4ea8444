"""Tests for pipelines.canonical.canonicalize: the entry point and its guarantees."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipelines.canonical import CanonicalText, canonical_form, canonicalize


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("F U C K you", "fuck you"),
        ("\U0001d41f\U0001d42e\U0001d41c\U0001d424", "fuck"),  # mathematical bold
        ("\uff26\uff32\uff25\uff25", "free"),  # full-width
        ("f\u03c5\u0441k", "fuck"),  # Greek upsilon, Cyrillic es
        ("f\u00fc\u00fcuuck", "fuuck"),  # marks stripped, then repeats squeezed
        ("f u u u c k", "fuuck"),  # joined, then squeezed
        ("\u50bb \u903c", "\u50bb\u903c"),
        ("\u8349\u6ce5\u99ac", "\u8349\u6ce5\u9a6c"),  # Traditional
        ("f\u200bu\u200bc\u200bk", "fuck"),
    ],
)
def test_base_canonical_text(raw: str, text: str) -> None:
    """Every base stage applies, in order, to give the text the model scores."""
    assert canonicalize(raw).text == text
    assert canonical_form(raw) == text


def test_readings_are_attached() -> None:
    """Leet, mask, link and pinyin readings come with the canonical text."""
    canonical = canonicalize("sh1t f*ck scam[.]com \u50bb\u903c")
    assert canonical.text == "sh1t f*ck scam[.]com \u50bb\u903c"
    assert canonical.leet[0].startswith("shit")
    assert canonical.masks == ("f*ck",)
    assert "scam.com" in canonical.links
    assert canonical.pinyin.syllables[-2:] == ("sa", "bi")


def test_plain_text_has_no_readings() -> None:
    """Ordinary English chat carries no readings and links equal to the text."""
    canonical = canonicalize("see you at the game tonight")
    assert canonical == CanonicalText(
        text="see you at the game tonight", links="see you at the game tonight"
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
@example("f u u u c k")
@example("\u50bb \u903c \u8aaa")
@example("a.\u0336b.c")
@example("\U0001d41f u c k")
def test_canonicalize_is_idempotent_and_total(raw: str) -> None:
    """canonicalize never raises and its text is a fixed point of itself."""
    once = canonicalize(raw)
    assert canonicalize(once.text).text == once.text


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("fuck sh1t*.-_ $@!0\u50bb\u903c\u99ac\u03c5\u0441\u0308")),
        max_size=40,
    )
)
def test_canonicalize_is_idempotent_on_disguise_characters(raw: str) -> None:
    """Texts made of the characters disguises use are canonicalised to a fixed point."""
    once = canonicalize(raw).text
    assert canonicalize(once).text == once


def test_repr_never_shows_the_text() -> None:
    """A CanonicalText that ends up in a log line shows sizes, not the message."""
    shown = repr(canonicalize("secret message sh1t"))
    assert "secret" not in shown
    assert "19 chars" in shown
