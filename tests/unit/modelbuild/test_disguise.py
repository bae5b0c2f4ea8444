"""Each disguise transform: seeded, confined to its targets, and undoable in the way it claims."""

from __future__ import annotations

import random
import unicodedata

import opencc
import pytest
from pypinyin import Style, lazy_pinyin

from modelbuild.disguise import (
    EN_TRANSFORMS,
    SPLIT_EMOJI,
    SPLIT_SYMBOLS,
    ZERO_WIDTH,
    ZH_MASKS,
    ZH_TRANSFORMS,
    apply_transform,
    disguise,
)
from modelbuild.homophones import homophone_groups, toneless

EN_LINE = "you are a stupid idiot and a pig"
EN_TARGETS = ("stupid idiot",)
ZH_LINE = "你就是个傻逼，赶紧去死吧"
ZH_TARGETS = ("傻逼", "去死")


def _en(
    name: str, seed: int = 7, text: str = EN_LINE, targets: tuple[str, ...] = EN_TARGETS
) -> str:
    out = apply_transform(name, text, "en", random.Random(seed), targets=targets)
    assert out is not None
    return out


def _zh(
    name: str, seed: int = 7, text: str = ZH_LINE, targets: tuple[str, ...] = ZH_TARGETS
) -> str:
    out = apply_transform(name, text, "zh", random.Random(seed), targets=targets)
    assert out is not None
    return out


def _outside_kept(out: str, prefix: str, suffix: str) -> None:
    assert out.startswith(prefix)
    assert out.endswith(suffix)


@pytest.mark.parametrize(("lang", "names"), [("en", EN_TRANSFORMS), ("zh", ZH_TRANSFORMS)])
def test_same_seed_same_disguises(lang: str, names: tuple[str, ...]) -> None:
    """Two runs with the same seed give identical output, one entry per transform that applies."""
    text, targets = (EN_LINE, EN_TARGETS) if lang == "en" else (ZH_LINE, ZH_TARGETS)
    first = disguise(text, lang, random.Random(3), targets=targets)
    second = disguise(text, lang, random.Random(3), targets=targets)
    assert first == second
    assert [d.transform for d in first] == list(names)
    assert all(d.text != text for d in first)


def test_different_seeds_can_differ() -> None:
    """The randomness is really used: leet over many seeds gives more than one spelling."""
    spellings = {_en("leet", seed) for seed in range(20)}
    assert len(spellings) > 1


@pytest.mark.parametrize("name", ["split_space", "split_symbol", "split_emoji"])
def test_en_split_rejoins_to_the_original(name: str) -> None:
    """Removing the separators from the split span gives the span back; the rest is untouched."""
    out = _en(name)
    _outside_kept(out, "you are a ", " and a pig")
    span = out[len("you are a ") : -len(" and a pig")]
    gap = "   " if name == "split_space" else " "
    words = span.split(gap)
    for sep in (" ", *SPLIT_SYMBOLS, *SPLIT_EMOJI):
        words = [w.replace(sep, "") for w in words]
    assert " ".join(words) == "stupid idiot"
    assert span != "stupid idiot"


@pytest.mark.parametrize("name", ["split_space", "split_symbol"])
def test_zh_split_rejoins_to_the_original(name: str) -> None:
    """Removing spaces and split symbols gives the Chinese line back."""
    out = _zh(name)
    joined = out.replace(" ", "")
    for sep in SPLIT_SYMBOLS:
        joined = joined.replace(sep, "")
    assert joined == ZH_LINE
    assert out != ZH_LINE


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_zero_width_is_invisible_padding(lang: str) -> None:
    """Deleting the zero-width characters gives the original line."""
    out = _en("zero_width") if lang == "en" else _zh("zero_width")
    assert any(z in out for z in ZERO_WIDTH)
    stripped = "".join(c for c in out if c not in ZERO_WIDTH)
    assert stripped == (EN_LINE if lang == "en" else ZH_LINE)


@pytest.mark.parametrize("name", ["fullwidth", "math_letters"])
def test_compatibility_forms_fold_back_under_nfkc(name: str) -> None:
    """Full-width and mathematical letters are compatibility forms: NFKC restores the line."""
    out = _en(name)
    assert out != EN_LINE
    assert not out[len("you are a ") : -len(" and a pig")].isascii()
    assert unicodedata.normalize("NFKC", out) == EN_LINE


def test_homoglyphs_are_foreign_letters_in_place() -> None:
    """Look-alikes replace letters one for one, only inside the target, from Greek or Cyrillic."""
    out = _en("homoglyph")
    assert len(out) == len(EN_LINE)
    changed = [(a, b) for a, b in zip(EN_LINE, out, strict=True) if a != b]
    assert changed
    for _, new in changed:
        assert unicodedata.name(new).startswith(("CYRILLIC", "GREEK"))
    _outside_kept(out, "you are a ", " and a pig")


def test_leet_swaps_letters_for_digits_and_symbols() -> None:
    """Leet keeps the length, changes at least one letter per word, only to non-letters."""
    out = _en("leet")
    assert len(out) == len(EN_LINE)
    for old_word, new_word in zip(["stupid", "idiot"], out.split()[3:5], strict=True):
        diffs = [b for a, b in zip(old_word, new_word, strict=True) if a != b]
        assert diffs
        assert not any(c.isalpha() for c in diffs)


def test_mask_keeps_first_and_last_letters() -> None:
    """Masked words keep their length and outer letters, with ``*`` inside."""
    out = _en("mask")
    for old_word, new_word in zip(["stupid", "idiot"], out.split()[3:5], strict=True):
        assert len(new_word) == len(old_word)
        assert new_word[0] == old_word[0]
        assert new_word[-1] == old_word[-1]
        assert "*" in new_word


def test_alternating_case_only_changes_case() -> None:
    """Lower-casing the result gives the line back, and the span has both cases."""
    out = _en("alternating_case")
    assert out.lower() == EN_LINE
    span = out[len("you are a ") : -len(" and a pig")]
    assert span != span.lower()
    assert span != span.upper()


def test_emoji_word_replaces_whole_words_only() -> None:
    """An emoji stands for "pig" but not for the "pig" inside "pigeon"."""
    out = _en("emoji_word", text="a pig and a pigeon", targets=())
    assert out == "a \U0001f437 and a pigeon"
    assert apply_transform("emoji_word", "hello there", "en", random.Random(1)) is None


def test_zh_emoji_word_replaces_the_mapped_characters() -> None:
    """死 becomes the skull emoji; the other characters stay."""
    out = _zh("emoji_word")
    assert out == ZH_LINE.replace("死", "\U0001f480")


def test_traditional_is_opencc_s2t_and_reverts() -> None:
    """The Traditional form differs and OpenCC's t2s brings the Simplified line back."""
    out = _zh("traditional")
    assert "個" in out
    assert opencc.OpenCC("t2s").convert(out) == ZH_LINE


def test_pinyin_spells_the_targets() -> None:
    """The target spans become their toneless pinyin; the rest stays in characters."""
    out = _zh("pinyin")
    compact = out.replace(" ", "")
    assert compact == "你就是个shabi，赶紧qusi吧"


def test_pinyin_initials_are_first_letters() -> None:
    """Initials of 傻逼 and 去死 are s b and q s, in either case."""
    out = _zh("pinyin_initials").lower()
    assert out == "你就是个sb，赶紧qs吧"
    assert lazy_pinyin("傻逼", style=Style.FIRST_LETTER) == ["s", "b"]


def test_homophones_sound_the_same() -> None:
    """Every swapped character has the same toneless pinyin; at least one is swapped per span."""
    out = _zh("homophone")
    assert len(out) == len(ZH_LINE)
    for target in ZH_TARGETS:
        start = ZH_LINE.index(target)
        new = out[start : start + len(target)]
        assert new != target
        assert toneless(new) == toneless(target)
    assert out[:4] == ZH_LINE[:4]


def test_homophone_groups_are_consistent() -> None:
    """Each character of each group reads as the group's key and appears in one group only."""
    groups = homophone_groups()
    seen: set[str] = set()
    for key, chars in groups.items():
        for char in chars:
            assert lazy_pinyin(char, style=Style.NORMAL) == [key]
            assert char not in seen
            seen.add(char)
    assert len(seen) > 2000


def test_zh_mask_hides_one_character_per_span() -> None:
    """One character of each multi-character target becomes a mask symbol."""
    out = _zh("mask")
    assert len(out) == len(ZH_LINE)
    diffs = [(a, b) for a, b in zip(ZH_LINE, out, strict=True) if a != b]
    assert len(diffs) == len(ZH_TARGETS)
    assert all(b in ZH_MASKS for _, b in diffs)


def test_no_targets_means_every_word() -> None:
    """Without targets a span transform reaches every word."""
    out = apply_transform("alternating_case", "ab cd", "en", random.Random(0))
    assert out is not None
    assert out.lower() == "ab cd"
    assert out[:2] != "ab"
    assert out[3:] != "cd"


def test_bad_names_and_targets_are_refused() -> None:
    """An unknown transform, a transform of the other language, a missing target: ValueError."""
    rng = random.Random(0)
    with pytest.raises(ValueError, match="unknown"):
        apply_transform("rot13", "x", "en", rng)
    with pytest.raises(ValueError, match="unknown"):
        apply_transform("pinyin", "x", "en", rng)
    with pytest.raises(ValueError, match="not in"):
        apply_transform("leet", "hello", "en", rng, targets=("bye",))
