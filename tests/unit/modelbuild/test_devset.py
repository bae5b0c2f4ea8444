"""The adversarial dev set: the committed file is what the generator makes from the seeds."""

from __future__ import annotations

from collections import Counter

import pytest

from modelbuild.devset import (
    CATEGORIES,
    DEVSET_PATH,
    DISGUISES_PER_SEED,
    SEEDS_PATH,
    SeedFileError,
    build_devset,
    parse_seeds,
    read_devset,
    to_jsonl,
)
from modelbuild.disguise import EN_TRANSFORMS, ZH_TRANSFORMS

SEEDS = parse_seeds(SEEDS_PATH.read_text(encoding="utf-8"))


def test_committed_file_is_regenerated_exactly() -> None:
    """`python -m modelbuild.devset` output equals the committed jsonl, byte for byte."""
    assert DEVSET_PATH.read_text(encoding="utf-8") == to_jsonl(build_devset(SEEDS))


def test_size_and_coverage() -> None:
    """At least 600 lines; both languages have plain, disguised and hard benign lines in every
    category, and every transform of the generator is represented at least 15 times."""
    lines = read_devset()
    assert len(lines) >= 600
    for lang in ("en", "zh"):
        for category in CATEGORIES:
            forms = {e.form for e in lines if e.lang == lang and e.category == category}
            assert forms == {"plain", "disguised", "benign_hard"}, (lang, category)
    counts = Counter((e.lang, e.transform) for e in lines if e.source == "generated")
    for lang, names in (("en", EN_TRANSFORMS), ("zh", ZH_TRANSFORMS)):
        for name in names:
            if name != "emoji_word":  # only lines with a word an emoji stands for
                assert counts[(lang, name)] >= 15, (lang, name)


def test_labels_follow_forms_and_texts_are_unique() -> None:
    """Plain and disguised lines are harmful, hard benign lines benign; no text appears twice."""
    lines = read_devset()
    for e in lines:
        assert e.label == ("benign" if e.form == "benign_hard" else "harmful")
        assert (e.transform == "none") == (e.form != "disguised")
    assert len({e.text for e in lines}) == len(lines)


def test_each_plain_seed_gets_its_disguises() -> None:
    """Right after a plain seed come its generated disguises, each a different transform."""
    built = build_devset(SEEDS[:3])
    plain = [e for e in built if e.form == "plain"]
    generated = [e for e in built if e.source == "generated"]
    assert len(generated) == DISGUISES_PER_SEED * len(plain)
    first = built[1 : 1 + DISGUISES_PER_SEED]
    assert len({e.transform for e in first}) == DISGUISES_PER_SEED
    assert all(e.category == built[0].category for e in first)


def test_targets_are_stripped_of_brackets() -> None:
    """`[word]` marks a target; the stored text has no brackets and keeps the word."""
    (seed,) = parse_seeds("@ plain en harassment\nyou [stupid] thing\n")
    assert seed.text == "you stupid thing"
    assert seed.targets == ("stupid",)


@pytest.mark.parametrize(
    "bad",
    [
        "a line before any header\n",
        "@ plain en weather\nhello\n",
        "@ plain fr hate\nbonjour\n",
        "@ benign_hard en hate\nno topic given\n",
        "@ disguised en hate leet\nno [targets] here\n",
    ],
)
def test_malformed_seed_files_are_refused(bad: str) -> None:
    """Unknown categories or languages, missing topics and misplaced targets raise."""
    with pytest.raises(SeedFileError):
        parse_seeds(bad)
