"""The rule engine matches disguised text through the canonical text and its readings."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset, parse_ruleset

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENGINE = RuleEngine(default_ruleset())


def _ids(engine: RuleEngine, text: str, metadata: Mapping[str, object] | None = None) -> set[str]:
    message = ChatMessage("m-1", "g-1", "u-1", text, SENT_AT, metadata or {})
    return {hit.rule_id for hit in engine.evaluate(message).hits}


def _keywords_engine(*keywords: str) -> RuleEngine:
    listed = ", ".join(f'"{keyword}"' for keyword in keywords)
    return RuleEngine(
        parse_ruleset(
            f'[[rules]]\nid = "t.kw"\ncategory = "offensive"\nseverity = "medium"\n'
            f'action = "flag"\nkind = "keywords"\nkeywords = [{listed}]\n'
        )
    )


@pytest.mark.parametrize(
    ("text", "rule_id"),
    [
        ("f u c k you", "en.offensive.profanity_at_someone"),
        ("f.u.c.k off", "en.offensive.profanity_at_someone"),
        ("you d-i-c-k-h-e-a-d", "en.offensive.profanity"),
        ("f\u03c5ck you", "en.offensive.profanity_at_someone"),  # Greek upsilon
        ("\U0001d41f\U0001d42e\U0001d41c\U0001d424\U0001d41e\U0001d42b", "en.offensive.profanity"),
        ("you a$$hole", "en.offensive.profanity"),
        ("f4gg0t", "en.hate.slur"),
        ("c*nt", "en.offensive.profanity"),
        ("f\U0001f595cker", "en.offensive.profanity"),  # emoji as a mask
        ("what a m0r0n", "en.offensive.insult"),
        ("\u50bb \u903c", "zh.offensive.profanity"),  # spaced
        ("\u50bb*\u903c", "zh.offensive.profanity"),  # masked separator
        ("\u8349\u6ce5\u99ac", "zh.offensive.profanity"),  # Traditional
        ("\u4ed6\u5abd\u7684", "zh.offensive.profanity"),  # Traditional
        ("shabi", "zh.offensive.profanity"),  # pinyin spelling
        ("nmsl", "zh.offensive.profanity"),  # initials of 3+ characters
        ("\u4f60\u4e2asb", "zh.offensive.profanity"),  # two-letter initials against Han
        ("\u50bb\u6bd4", "zh.offensive.profanity"),  # homophone sharing a character
        ("\u4f60 ni ma si le", "zh.offensive.profanity"),  # spaced pinyin in Chinese text
        ("\u7ea6\u6ce1\u5417", "zh.sexual.solicitation"),  # homophone of yue pao
        ("\u6211 \u8981 \u6740 \u4e86 \u4f60", "zh.threat.direct"),  # regex on joined text
        ("FREE MONEY at hxxps://scam[.]example", "spam.free_money_link"),
    ],
)
def test_disguised_text_is_caught(text: str, rule_id: str) -> None:
    """A disguise the old normalisation missed now fires the rule it hides from."""
    assert rule_id in _ids(ENGINE, text)


@pytest.mark.parametrize(
    "text",
    [
        "b4 the game",
        "costs $25 or $30",
        "2nd place again",
        "my l33t skills",
        "she is the man, bin it",
        "sb",  # two-letter initials alone are as likely English
        "by the way",
        "u r a good friend",
        "this cl4ss rocks",  # reads "class": "ass" needs a word boundary
        "\u6211\u4eec\u4e0d\u89c1\u4eba",  # jian ren, but an ordinary reading of it exists
        "\u4f60\u4e2a\u7b28\u86cb",  # ni ge: no shared character with the slur ni ge
        "\u4f60\u54e5\u54e5\u8eab\u4f53\u8fd8\u597d\u5417",  # ni ge: "your brother", a pronoun
        "\u50bb\u74dc\u76f8\u673a",  # shares a character with the abuse word
        "\u8fdc\u90ca\u7684\u623f\u5b50",  # yuan jiao is also an ordinary word
        "\u043f\u0440\u0438\u0432\u0435\u0442 \u0434\u0440\u0443\u0433",  # Russian
        "polka dot dress",
        "shift happens",
    ],
)
def test_near_misses_stay_clean(text: str) -> None:
    """Ordinary text that resembles a disguise fires no rule."""
    assert _ids(ENGINE, text) == set()


def test_precomputed_canonical_text_gives_the_same_outcome() -> None:
    """Passing canonicalize(text) to evaluate is the same as letting the engine compute it."""
    message = ChatMessage("m", "g", "u", "f u c k \u50bb \u903c", SENT_AT)
    assert ENGINE.evaluate(message, canonicalize(message.text)) == ENGINE.evaluate(message)


def test_masks_fit_only_when_the_visible_letters_agree() -> None:
    """``f*ck`` matches ``fuck``; ``f*rk`` and a mask of the wrong length do not."""
    engine = _keywords_engine("fuck")
    assert _ids(engine, "f*ck off") == {"t.kw"}
    assert _ids(engine, "f**k") == {"t.kw"}
    assert _ids(engine, "f*rk") == set()
    assert _ids(engine, "f*cks") == set()


def test_keyword_lists_are_canonicalised_like_messages() -> None:
    """A list entry in Traditional or styled letters matches the plain message."""
    engine = _keywords_engine("\u8aaa\u8a71", "\uff46\uff52\uff45\uff45")
    assert _ids(engine, "\u8bf4\u8bdd") == {"t.kw"}
    assert _ids(engine, "free stuff") == {"t.kw"}


def test_chinese_keyword_matches_anywhere_latin_needs_boundaries() -> None:
    """Chinese keywords match inside text; Latin keywords and pinyin words need boundaries."""
    engine = _keywords_engine("\u50bb\u903c", "ass")
    assert _ids(engine, "\u4f60\u662f\u50bb\u903c\u5417") == {"t.kw"}
    assert _ids(engine, "glass") == set()
    assert _ids(engine, "shabiz") == set()


def test_new_account_link_sees_defanged_links() -> None:
    """A one-hour-old account posting ``scam dot com`` is flagged as posting a link."""
    new = {"sender_joined_at": (SENT_AT - timedelta(hours=1)).isoformat()}
    assert "profile.new_account_link" in _ids(ENGINE, "deals at scam dot com", new)
    assert "profile.new_account_link" not in _ids(ENGINE, "polka dot dress", new)


def test_pinyin_words_of_a_chinese_keyword() -> None:
    """Spellings match anywhere; initials only when all consonants, two letters only near Han
    and only when two keywords of the rule share them."""
    engine = _keywords_engine("\u7231\u4f60\u4eec", "\u50bb\u903c", "\u715e\u7b14")
    assert _ids(engine, "ainimen") == {"t.kw"}  # ai ni men, spelled
    assert _ids(engine, "anm") == set()  # initials with a vowel read as English letters
    assert _ids(engine, "shabi") == {"t.kw"}
    assert _ids(engine, "sb") == set()
    assert _ids(engine, "\u4f60sb") == {"t.kw"}  # sb: both sha bi keywords give it
    lone = _keywords_engine("\u5c3c\u54e5")  # ni ge, the only keyword giving ng
    assert _ids(lone, "\u6bd4NG\u8d35") == set()
    assert _ids(lone, "nige") == {"t.kw"}


def test_homophones_must_keep_half_the_characters() -> None:
    """A homophone keeping half the keyword's characters matches; a same-sounding phrase that
    keeps none does not."""
    engine = _keywords_engine("\u4ed6\u5988\u7684", "\u52a0\u5fae\u4fe1")  # ta ma de; jia wei xin
    assert _ids(engine, "\u4ed6\u5417\u7684") == {"t.kw"}  # keeps two of three
    assert _ids(engine, "\u5b83\u9a82\u5f97") == set()  # same sound, no character kept
    assert _ids(engine, "\u4ef7\u4f4d\u6027\u4ef7\u6bd4") == set()  # a price-value phrase


def test_homophones_do_not_change_a_character_into_a_pronoun() -> None:
    """你哥 keeps 哥 of the slur 尼哥 but writes the pronoun 你: ordinary speech ("your brother");
    他吗的 keeps its pronoun and changes 妈, so it still matches 他妈的."""
    engine = _keywords_engine("\u5c3c\u54e5", "\u4ed6\u5988\u7684")  # ni ge; ta ma de
    assert _ids(engine, "\u66ff\u6211\u5411\u4f60\u54e5\u95ee\u597d") == set()
    assert _ids(engine, "\u6ce5\u54e5") == {"t.kw"}  # ni ge, 泥 for 尼
    assert _ids(engine, "\u4ed6\u5417\u7684") == {"t.kw"}
