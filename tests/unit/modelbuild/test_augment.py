"""Disguise augmentation: seeded, label-preserving, training split only, canonical forms."""

from __future__ import annotations

from modelbuild.augment import MAX_CHARS, disguised_examples, disguised_forms
from modelbuild.canonical_inputs import canonical_text
from modelbuild.datasets import INTENT, Example, TaskData
from modelbuild.robust_data import robust_task

SEED = 7
_LEX = {"en": ["moron", "idiot"], "zh": ["废物", "傻逼"]}
_HARMFUL = frozenset({1, 2})


def _examples() -> list[Example]:
    return [
        Example("shut up you moron", 1, "en", "template-insult", False),
        Example("what an idiot, honestly", 1, "en", "template-insult", False),
        Example("你这个废物", 1, "zh", "template-insult", False),
        Example("楼上傻逼", 2, "zh", "template-hate", False),
        Example("you are a moron", 1, "en", "template-insult", True),
        Example("nice weather today", 0, "en", "chatterbot", False),
        Example("moron " * 40, 1, "en", "tweets", False),
    ]


def test_same_seed_same_forms() -> None:
    """The forms are a function of seed and text: equal twice, different for another seed."""
    first = disguised_examples(_examples(), _HARMFUL, SEED, canonical_text, lexicons=_LEX)
    again = disguised_examples(
        list(reversed(_examples())), _HARMFUL, SEED, canonical_text, lexicons=_LEX
    )
    assert sorted(first, key=repr) == sorted(again, key=repr)
    other = disguised_examples(_examples(), _HARMFUL, SEED + 1, canonical_text, lexicons=_LEX)
    assert sorted(first, key=repr) != sorted(other, key=repr)


def test_only_short_harmful_training_examples_keep_their_label() -> None:
    """Held-out, benign and over-long examples are never disguised; a form keeps its label."""
    out = disguised_examples(_examples(), _HARMFUL, SEED, canonical_text, lexicons=_LEX)
    assert out
    assert all(not e.test and e.source.startswith("augment-") for e in out)
    assert all(len(e.text) <= 2 * MAX_CHARS for e in out)
    assert not [e for e in out if "weather" in e.text]
    assert {(e.lang, e.label) for e in out} <= {("en", 1), ("zh", 1), ("zh", 2)}
    assert not [e for e in out if e.text.count("m") > 20]


def test_forms_are_canonical_new_and_at_most_two() -> None:
    """Every form is canonical text, differs from the canonical plain line and the other forms."""
    for text, lang in (("shut up you moron", "en"), ("你这个废物", "zh")):
        forms = disguised_forms(text, lang, SEED, canonical_text, lexicon=_LEX[lang])
        texts = [f for f, _ in forms]
        assert 1 <= len(forms) <= 2
        assert len(set(texts)) == len(texts)
        assert canonical_text(text) not in texts
        assert all(canonical_text(f) == f for f in texts)


def test_the_lexicon_word_is_what_is_disguised() -> None:
    """With the insult in the lexicon, the rest of the line is left as it was."""
    forms = disguised_forms("shut up you moron", "en", SEED, canonical_text, lexicon=["moron"])
    assert forms
    assert all(f.startswith("shut up you ") for f, _ in forms)
    assert not [f for f, _ in forms if f.endswith("moron")]


def test_the_limit_per_language_holds() -> None:
    """No language gets more than ``limit_per_lang`` disguised lines."""
    many = [Example(f"you moron number {i}", 1, "en", "t", False) for i in range(30)]
    out = disguised_examples(many, _HARMFUL, SEED, canonical_text, lexicons=_LEX, limit_per_lang=9)
    assert len(out) == 9


def test_robust_intent_disguises_spam_and_ads_only() -> None:
    """In intent only spam and advertisement training lines gain disguised forms."""
    data = TaskData(
        "intent",
        INTENT,
        (
            Example("代购名牌包包加微信123", 3, "zh", "template-ad", False),
            Example("buy followers now", 2, "en", "spamassassin-spam", False),
            Example("how are you?", 1, "en", "chatterbot", False),
        ),
    )
    lex = {"en": ["moron"], "zh": ["废物"], "zh_ads": ["代购"]}
    out = [e for e in robust_task(data, lex, SEED).examples if e.source.startswith("augment-")]
    assert {INTENT[e.label] for e in out} == {"spam", "advertisement"}
