"""Tests for pipelines.canonical.trace: the canonical text and readings mapped back to raw."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.canonical import canonicalize, trace
from pipelines.canonical.offsets import OffsetError, OffsetMap

_FULL_WIDTH = 0xFEE0


def _raw(raw: str, mapping: OffsetMap, text: str, needle: str) -> str:
    start = text.index(needle)
    low, high = mapping.raw_span(start, start + len(needle))
    return raw[low:high]


def test_same_canonical_text_as_canonicalize() -> None:
    """``trace`` returns exactly what ``canonicalize`` gives, with maps of the same lengths."""
    raw = "F.U.C.K y0u \u50bb \u903c kiiiill sh*t scam[.]com"
    traced = trace(raw)
    canonical = canonicalize(raw)
    assert traced.canonical.text == canonical.text
    assert traced.canonical.leet == canonical.leet
    assert len(traced.text_map) == len(canonical.text)
    assert len(traced.links_map) == len(canonical.links)
    assert [len(m) for m in traced.leet_maps] == [len(r) for r in canonical.leet]


def test_disguised_message_maps_to_its_raw_characters() -> None:
    """``f.u.c.k y0u``: the base text's ``fuck`` covers ``f.u.c.k``, the leet reading's ``you``
    covers ``y0u``."""
    raw = "well f.u.c.k y0u then"
    traced = trace(raw)
    canonical = traced.canonical
    assert _raw(raw, traced.text_map, canonical.text, "fuck") == "f.u.c.k"
    reading = canonical.leet[0]
    assert _raw(raw, traced.leet_maps[0], reading, "fuck you") == "f.u.c.k y0u"


def test_stretched_reading_maps_to_the_whole_stretch() -> None:
    """The reading ``kill`` of ``kiiiiill`` covers all the stretched letters."""
    raw = "i will kiiiiill you"
    traced = trace(raw)
    index = next(i for i, r in enumerate(traced.canonical.leet) if "kill you" in r)
    reading = traced.canonical.leet[index]
    assert _raw(raw, traced.leet_maps[index], reading, "kill") == "kiiiiill"


def test_look_alikes_and_marks_map_one_to_one() -> None:
    """Cyrillic look-alikes, marks and Traditional characters map to the characters typed."""
    raw = "f\u0443\u0441k off, s\u00fcck it, \u50bb\u903c\u8aaa"
    traced = trace(raw)
    text = traced.canonical.text
    assert _raw(raw, traced.text_map, text, "off") == "off"
    assert _raw(raw, traced.text_map, text, "suck") == "s\u00fcck"
    assert _raw(raw, traced.text_map, text, "\u8bf4") == "\u8aaa"


def test_masks_and_links_are_located() -> None:
    """A masked token and a restored link map to what was typed."""
    raw = "oh F*CK, see scam[.]com"
    traced = trace(raw)
    assert [raw[a:b] for a, b in traced.mask_spans] == ["F*CK"]
    links = traced.canonical.links
    assert _raw(raw, traced.links_map, links, "scam.com") == "scam[.]com"


def test_pinyin_codes_map_to_characters_and_words() -> None:
    """Each pinyin code maps to its Han character or its Latin word."""
    raw = "\u4f60 MA \u6b7b\u4e86"
    traced = trace(raw)
    codes = traced.canonical.pinyin.codes
    assert len(traced.pinyin_map) == len(codes)
    assert [raw[traced.pinyin_map.starts[i] : traced.pinyin_map.ends[i]] for i in range(4)] == [
        "\u4f60",
        "MA",
        "\u6b7b",
        "\u4e86",
    ]


_LETTERS = "abcdefghjkmn"
_FILLER = st.text(alphabet="pqrstuvwxyz", min_size=2, max_size=6)


@st.composite
def _disguised(draw: st.DrawFn) -> tuple[str, str, int, int]:
    """A raw message with one disguised word in it: the word, the message and where the
    disguised word lies in it."""
    word = "".join(draw(st.lists(st.sampled_from(_LETTERS), min_size=4, max_size=8, unique=True)))
    pieces: list[str] = []
    for char in word:
        kind = draw(st.sampled_from(["plain", "upper", "wide", "mark"]))
        if kind == "upper":
            char = char.upper()
        elif kind == "wide":
            char = chr(ord(char) + _FULL_WIDTH)
        elif kind == "mark":
            char += "\u0301"
        pieces.append(char)
    separator = draw(st.sampled_from(["", ".", "-", "\u200b", " "]))
    disguised = separator.join(pieces)
    before = draw(st.lists(_FILLER, max_size=3))
    after = draw(st.lists(_FILLER, max_size=3))
    head = " ".join([*before, ""]) if before else ""
    raw = head + disguised + "".join(" " + w for w in after)
    return word, raw, len(head), len(head) + len(disguised)


@settings(max_examples=150, deadline=None)
@given(_disguised())
def test_disguised_word_maps_exactly_to_its_raw_range(case: tuple[str, str, int, int]) -> None:
    """Whatever disguise (case, full-width, accents, separators, zero-width), the canonical
    word maps to exactly the raw characters that spelled it, from its first to its last (an
    accent on the last letter included)."""
    word, raw, start, end = case
    traced = trace(raw)
    text = traced.canonical.text
    assert word in text
    found = text.index(word)
    assert traced.text_map.raw_span(found, found + len(word)) == (start, end)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_every_span_lies_inside_the_raw_text(raw: str) -> None:
    """For any text, every character of the canonical text and of every reading maps to a
    non-empty range inside the raw text, and every mask to one inside it."""
    traced = trace(raw)
    canonical = traced.canonical
    maps = [
        (traced.text_map, canonical.text),
        (traced.links_map, canonical.links),
        *zip(traced.leet_maps, canonical.leet, strict=True),
    ]
    for mapping, text in maps:
        assert len(mapping) == len(text)
        assert all(
            0 <= low < high <= len(raw)
            for low, high in zip(mapping.starts, mapping.ends, strict=True)
        )
    assert all(0 <= low < high <= len(raw) for low, high in traced.mask_spans)
    if canonical.pinyin.codes:
        assert all(
            0 <= low < high <= len(raw)
            for low, high in zip(traced.pinyin_map.starts, traced.pinyin_map.ends, strict=True)
        )


def test_a_canonical_text_of_another_text_is_refused() -> None:
    """``trace`` reuses the caller's canonical text only when it is the text's own."""
    raw = "Hello THERE"
    assert trace(raw, canonicalize(raw)).canonical.text == "hello there"
    with pytest.raises(OffsetError):
        trace(raw, canonicalize("something else"))
