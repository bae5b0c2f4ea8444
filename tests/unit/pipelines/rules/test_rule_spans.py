"""Tests for the spans of rule hits: where each rule matched, on the raw text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, parse_ruleset
from pipelines.rules.engine import MAX_SPANS

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _rule(rule_id: str, body: str, category: str = "test") -> str:
    return (
        f'[[rules]]\nid = "{rule_id}"\ncategory = "{category}"\nseverity = "high"\n'
        f'action = "flag"\n{body}\n'
    )


def _marked(engine: RuleEngine, text: str, **metadata: object) -> dict[str, list[str]]:
    """Rule id -> the raw pieces of ``text`` its spans mark."""
    outcome = engine.evaluate(ChatMessage("m-1", "g-1", "u-1", text, SENT_AT, metadata))
    return {hit.rule_id: [text[start:end] for start, end in hit.spans] for hit in outcome.hits}


KEYWORDS = RuleEngine(
    parse_ruleset(
        _rule("kw", 'kind = "keywords"\nkeywords = ["fuck", "fuck you", "shit"]')
        + _rule("zh", 'kind = "keywords"\nkeywords = ["傻逼", "煞笔"]')
        + _rule("re", 'kind = "regex"\npatterns = ["kill (?:yo)?u"]')
    )
)


def test_a_disguised_message_marks_the_raw_characters() -> None:
    """``f.u.c.k y0u``: the spans cover the dotted letters and the leet word as typed."""
    assert _marked(KEYWORDS, "well f.u.c.k y0u then") == {"kw": ["f.u.c.k y0u"]}
    assert _marked(KEYWORDS, "so F.U.C.K this") == {"kw": ["F.U.C.K"]}


def test_each_occurrence_is_a_span_in_order() -> None:
    """Every occurrence counts, in text order; ``kw`` matches twice."""
    wide = "\uff33\uff48\uff49\uff54"  # full-width Shit
    assert _marked(KEYWORDS, f"shit. {wide}!") == {"kw": ["shit", wide]}


def test_readings_map_back_stretched_masked_and_look_alike_words() -> None:
    """A stretched word, a masked word and look-alike letters are marked as typed."""
    assert _marked(KEYWORDS, "shiiiiit") == {"kw": ["shiiiiit"]}
    assert _marked(KEYWORDS, "oh sh*t") == {"kw": ["sh*t"]}
    assert _marked(KEYWORDS, "fu\u0441k that") == {"kw": ["fu\u0441k"]}


def test_chinese_keywords_split_in_homophones_and_in_pinyin() -> None:
    """Split characters, homophones and pinyin spellings are marked on what was typed."""
    assert _marked(KEYWORDS, "你是傻 * 逼") == {"zh": ["傻 * 逼"]}
    assert _marked(KEYWORDS, "你是傻比吧") == {"zh": ["傻比"]}
    assert _marked(KEYWORDS, "你个shabi") == {"zh": ["shabi"]}


def test_regex_spans_come_from_the_reading_that_matched() -> None:
    """A pattern that matched a leet reading is marked on the leet text."""
    assert _marked(KEYWORDS, "i will K1LL U") == {"re": ["K1LL U"]}


def test_a_span_inside_an_exempt_phrase_is_left_out() -> None:
    """Where the rule also matched inside its exempt phrase, only the counted match is
    marked."""
    engine = RuleEngine(
        parse_ruleset(_rule("ch", 'kind = "keywords"\nkeywords = ["chink"]\nexempt = ["chink in"]'))
    )
    assert _marked(engine, "a chink in the armour, you chink") == {"ch": ["chink"]}
    text = "a chink in the armour, you chink"
    (hit,) = engine.evaluate(ChatMessage("m", "g", "u", text, SENT_AT)).hits
    assert hit.spans == ((27, 32),)


def test_new_account_link_marks_the_link() -> None:
    """A new account's link rule marks the link; a sender blocklist marks nothing."""
    engine = RuleEngine(
        parse_ruleset(
            _rule("new", 'kind = "profile"\ncheck = "new_account_link"\nmax_account_age_hours = 24')
            + _rule("blocked", 'kind = "profile"\ncheck = "sender_blocklist"\nsender_ids = ["u-1"]')
        )
    )
    joined = (SENT_AT - timedelta(hours=1)).isoformat()
    assert _marked(engine, "go to scam[.]com now", sender_joined_at=joined) == {
        "new": ["scam[.]com"],
        "blocked": [],
    }


def test_spans_are_bounded_and_ordered() -> None:
    """A message repeating a keyword keeps at most ``MAX_SPANS`` spans, in order."""
    text = " ".join(["shit"] * (MAX_SPANS + 10))
    (hit,) = KEYWORDS.evaluate(ChatMessage("m", "g", "u", text, SENT_AT)).hits
    assert len(hit.spans) == MAX_SPANS
    assert list(hit.spans) == sorted(hit.spans)
    assert all(text[start:end] == "shit" for start, end in hit.spans)


def test_a_canonical_text_of_another_message_gives_no_spans() -> None:
    """Spans are only computed against the message's own text: a caller's canonical text of
    another text gives the hits without spans rather than wrong ones."""
    message = ChatMessage("m", "g", "u", "shit", SENT_AT)
    (hit,) = KEYWORDS.evaluate(message, canonicalize("oh shit")).hits
    assert hit.rule_id == "kw"
    assert hit.spans == ()


def test_rules_sharing_words_each_get_their_own_spans() -> None:
    """Two rules whose keywords overlap (one word, and a phrase holding it) both mark what they
    matched; a Chinese keyword ending in a Latin letter needs its right boundary."""
    engine = RuleEngine(
        parse_ruleset(
            _rule("word", 'kind = "keywords"\nkeywords = ["idiot"]')
            + _rule("phrase", 'kind = "keywords"\nkeywords = ["you idiot"]')
            + _rule("contact", 'kind = "keywords"\nkeywords = ["加v"]')
        )
    )
    assert _marked(engine, "YOU IDIOT, idiot") == {
        "word": ["IDIOT", "idiot"],
        "phrase": ["YOU IDIOT"],
    }
    assert _marked(engine, "快加v 加vip") == {"contact": ["加v"]}


def test_an_engine_without_spans_gives_the_same_hits_unlocated() -> None:
    """``spans=False`` (for measuring) gives the same hits, without spans."""
    ruleset = parse_ruleset(_rule("kw", 'kind = "keywords"\nkeywords = ["shit"]'))
    message = ChatMessage("m", "g", "u", "oh SHIT", SENT_AT)
    (located,) = RuleEngine(ruleset).evaluate(message).hits
    (plain,) = RuleEngine(ruleset, spans=False).evaluate(message).hits
    assert located.spans == ((3, 7),)
    assert plain.spans == ()
    assert plain.rule_id == located.rule_id
