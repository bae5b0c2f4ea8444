"""Tests for pipelines.rules.masks: masked tokens fitted against single-word Latin keywords."""

from __future__ import annotations

from pipelines.rules.masks import MaskMatcher

MATCHER = MaskMatcher(
    {"fuck": ["r.a"], "shit": ["r.b"], "piece of shit": ["r.c"], "\u50bb\u903c": ["r.d"]}
)


def test_mask_fits_by_first_or_last_visible_letter() -> None:
    """A mask showing its first letter, or only its last, finds the keyword it fits."""
    assert MATCHER.match(["f*ck"]) == {"r.a"}
    assert MATCHER.match(["*uck"]) == {"r.a"}
    assert MATCHER.match(["sh*t", "f**k"]) == {"r.a", "r.b"}


def test_masks_that_fit_nothing_or_are_open_at_both_ends() -> None:
    """Wrong letters, wrong length or a mask starred at both ends find nothing."""
    assert MATCHER.match(["f*rk"]) == set()
    assert MATCHER.match(["f*cks"]) == set()
    assert MATCHER.match(["*uc*"]) == set()


def test_only_single_latin_words_are_indexed() -> None:
    """Phrases and Chinese keywords are never fitted by a mask."""
    assert MATCHER.match(["piece*of*shit"]) == set()
    assert MATCHER.match(["\u50bb*"]) == set()
