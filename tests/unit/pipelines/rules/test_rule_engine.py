"""Tests for pipelines.rules.engine and its matchers: what fires, ordering, dedup, boundaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import re2

from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleAction, Severity
from pipelines.rules import RuleEngine, parse_ruleset
from pipelines.rules.keywords import is_boundary_char
from pipelines.rules.patterns import SHARD_PATTERNS, PatternMatcher
from pipelines.rules.profile import contains_link, metadata_timestamp

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _message(
    text: str, sender_id: str = "u-1", metadata: dict[str, object] | None = None
) -> ChatMessage:
    return ChatMessage("m-1", "g-1", sender_id, text, SENT_AT, metadata or {})


def _rule(rule_id: str, body: str, severity: str = "medium", action: str = "flag") -> str:
    return (
        f'[[rules]]\nid = "{rule_id}"\ncategory = "test"\nseverity = "{severity}"\n'
        f'action = "{action}"\n{body}\n'
    )


def _engine(*rules: str) -> RuleEngine:
    return RuleEngine(parse_ruleset("".join(rules)))


def _ids(engine: RuleEngine, text: str, **kwargs: object) -> list[str]:
    return [hit.rule_id for hit in engine.evaluate(_message(text, **kwargs)).hits]  # type: ignore[arg-type]


def test_latin_keywords_need_word_boundaries() -> None:
    """'ass' matches as a word but not inside 'class', 'assets' or 'bass'."""
    engine = _engine(_rule("kw", 'kind = "keywords"\nkeywords = ["ass"]'))
    assert _ids(engine, "you ass") == ["kw"]
    assert _ids(engine, "ass!") == ["kw"]
    assert _ids(engine, "(ass)") == ["kw"]
    assert _ids(engine, "我觉得ass很好") == ["kw"]  # CJK neighbours are not word characters
    assert _ids(engine, "this class is great") == []
    assert _ids(engine, "assets and bass") == []
    assert _ids(engine, "ass1") == []


def test_cjk_keywords_match_anywhere() -> None:
    """Chinese keywords match inside longer runs of Chinese text without spaces."""
    engine = _engine(_rule("zh", 'kind = "keywords"\nkeywords = ["刷单"]'))
    assert _ids(engine, "我们在招兼职刷单的人") == ["zh"]
    assert _ids(engine, "abc刷单123") == ["zh"]
    assert _ids(engine, "刷卡单独") == []


def test_mixed_keyword_boundary_only_on_latin_side() -> None:
    """'加v' needs a boundary after the 'v' but none before the '加'."""
    engine = _engine(_rule("mix", 'kind = "keywords"\nkeywords = ["加v"]'))
    assert _ids(engine, "快来加v了解") == ["mix"]
    assert _ids(engine, "快来加vip了解") == []


def test_keywords_match_obfuscated_spellings() -> None:
    """Full-width, upper-case, zero-width and stretched spellings normalise onto the keyword."""
    engine = _engine(_rule("kw", 'kind = "keywords"\nkeywords = ["free money", "fuuck"]'))
    assert _ids(engine, "\uff26\uff32\uff25\uff25  \uff2d\uff4f\uff4e\uff45\uff59") == ["kw"]
    assert _ids(engine, "fr\u200bee\nmoney") == ["kw"]
    assert _ids(engine, "FUUUUUUCK") == ["kw"]


def test_overlapping_keywords_all_considered() -> None:
    """A failed boundary on one occurrence does not hide a later valid occurrence."""
    engine = _engine(_rule("kw", 'kind = "keywords"\nkeywords = ["ass"]'))
    assert _ids(engine, "class ass") == ["kw"]


def test_shared_keyword_fires_every_owning_rule() -> None:
    """Two rules listing the same keyword both fire."""
    engine = _engine(
        _rule("a", 'kind = "keywords"\nkeywords = ["spam"]'),
        _rule("b", 'kind = "keywords"\nkeywords = ["spam", "eggs"]'),
    )
    assert sorted(_ids(engine, "spam")) == ["a", "b"]
    assert _ids(engine, "eggs") == ["b"]


def test_regex_any_and_all() -> None:
    """'any' rules need one pattern, 'all' rules need every pattern."""
    engine = _engine(
        _rule("any", 'kind = "regex"\npatterns = ["cat", "dog"]'),
        _rule("all", 'kind = "regex"\npatterns = ["cat", "dog"]\nmatch = "all"'),
    )
    assert _ids(engine, "a cat") == ["any"]
    assert sorted(_ids(engine, "a cat and a dog")) == ["all", "any"]
    assert _ids(engine, "a bird") == []


def test_regex_rules_spread_over_several_sets_keep_their_owners() -> None:
    """More patterns than one RE2 set holds (``SHARD_PATTERNS``) are split over several sets;
    a match in a later set names its own rule, and an 'all' rule whose patterns straddle two sets
    still needs every one."""
    per_rule = 7
    starts = range(0, SHARD_PATTERNS * 2 + 30, per_rule)
    words = [f"word{n:03d}" for n in range(starts[-1] + per_rule)]
    rules = [
        _rule(f"r{start}", f'kind = "regex"\npatterns = {words[start : start + per_rule]!r}')
        for start in starts
    ]
    straddle = [f"edge{SHARD_PATTERNS - 1}", f"edge{SHARD_PATTERNS}"]
    both = _rule("both", f'kind = "regex"\npatterns = {straddle!r}\nmatch = "all"')
    # "both" comes first so its two patterns sit either side of the first set's end
    engine = _engine(
        *rules[: (SHARD_PATTERNS - 1) // per_rule], both, *rules[(SHARD_PATTERNS - 1) // per_rule :]
    )
    assert len(engine._patterns._sets) > 2  # the split is what is tested
    assert _ids(engine, f"a {words[-1]} here") == [f"r{starts[-1]}"]
    assert _ids(engine, f"a {words[0]} here") == ["r0"]
    assert "both" not in _ids(engine, straddle[0])
    assert "both" in _ids(engine, " ".join(straddle))


def test_regex_exempt_spans_do_not_count() -> None:
    """A hit only inside an exempt span is dropped; one outside it (or with no span) counts."""
    body = 'kind = "regex"\npatterns = ["kill myself"]\nexempt = ["told me to kill myself"]'
    engine = _engine(_rule("intent", body))
    assert _ids(engine, "i want to kill myself") == ["intent"]
    assert _ids(engine, "he told me to kill myself") == []
    assert _ids(engine, "he told me to kill myself, so i will kill myself") == ["intent"]
    all_body = 'kind = "regex"\npatterns = ["cat", "dog"]\nmatch = "all"\nexempt = ["no dog"]'
    both = _engine(_rule("all", all_body))
    assert _ids(both, "a cat and a dog") == ["all"]
    assert _ids(both, "a cat and no dog") == []


def test_regex_sees_normalised_text() -> None:
    """Regexes run on normalised text: case-folded and full-width digits as ASCII."""
    engine = _engine(_rule("num", 'kind = "regex"\npatterns = ["code \\\\d{3}"]'))
    assert _ids(engine, "CODE \uff11\uff12\uff13") == ["num"]


def test_catastrophic_regex_runs_in_re2() -> None:
    """A (a+)+$ rule is compiled by RE2 only and evaluates 50,000 'a's and '!' once."""
    ruleset = parse_ruleset(_rule("evil", 'kind = "regex"\npatterns = ["(a+)+$"]'))
    matcher = PatternMatcher([r for r in ruleset.rules if r.meta.id == "evil"])  # type: ignore[misc]
    assert all(type(compiled) is re2._Regexp for compiled in matcher.compiled)
    engine = RuleEngine(ruleset)
    assert _ids(engine, "a" * 50_000 + "!") == []
    assert _ids(engine, "a" * 50_000) == ["evil"]


def test_hits_sorted_most_severe_first_and_deduplicated() -> None:
    """Hits come most severe first, then block/escalate/flag, then id; each rule once."""
    engine = _engine(
        _rule("low.flag", 'kind = "keywords"\nkeywords = ["x", "y"]', "low", "flag"),
        _rule("crit.esc", 'kind = "keywords"\nkeywords = ["x"]', "critical", "escalate"),
        _rule("crit.block", 'kind = "regex"\npatterns = ["x"]', "critical", "block"),
        _rule("high.flag", 'kind = "regex"\npatterns = ["x", "y"]', "high", "flag"),
    )
    outcome = engine.evaluate(_message("x, y, x, y"))
    assert [h.rule_id for h in outcome.hits] == ["crit.block", "crit.esc", "high.flag", "low.flag"]
    assert outcome.hits[0].severity is Severity.CRITICAL
    assert outcome.hits[0].action is RuleAction.BLOCK
    assert outcome.is_decisive
    assert outcome.wants_escalation


def test_disabled_rules_do_not_fire() -> None:
    """A rule with enabled = false is loaded but never evaluated."""
    engine = _engine(_rule("off", 'kind = "keywords"\nkeywords = ["x"]\nenabled = false'))
    assert _ids(engine, "x") == []


def test_empty_ruleset_never_fires() -> None:
    """An engine without rules returns an empty outcome."""
    outcome = RuleEngine(parse_ruleset("")).evaluate(_message("anything at all"))
    assert outcome.hits == ()
    assert not outcome.is_decisive


BLOCKLIST = _rule(
    "p.blocked",
    'kind = "profile"\ncheck = "sender_blocklist"\nsender_ids = ["bad-1", "bad-2"]',
    "critical",
    "block",
)
NEW_ACCOUNT = _rule(
    "p.new", 'kind = "profile"\ncheck = "new_account_link"\nmax_account_age_hours = 24'
)
STRIKES = _rule(
    "p.strikes", 'kind = "profile"\ncheck = "repeat_offender"\nmin_strikes = 3', action="escalate"
)


def test_sender_blocklist() -> None:
    """A listed sender is blocked whatever the text; others are not."""
    engine = _engine(BLOCKLIST)
    assert _ids(engine, "hello", sender_id="bad-2") == ["p.blocked"]
    assert _ids(engine, "hello", sender_id="bad-3") == []


@pytest.mark.parametrize(
    ("joined", "text", "fires"),
    [
        ((SENT_AT - timedelta(hours=2)).isoformat(), "see https://x.example", True),
        ((SENT_AT - timedelta(hours=2)).isoformat(), "see ww.shop.com", True),
        ((SENT_AT - timedelta(hours=2)).isoformat(), "see example.com/deal", True),
        (int((SENT_AT - timedelta(hours=1)).timestamp() * 1000), "http://a.b", True),
        ((SENT_AT + timedelta(hours=1)).isoformat(), "http://a.b", True),  # clock skew
        ((SENT_AT - timedelta(hours=30)).isoformat(), "see https://x.example", False),
        ((SENT_AT - timedelta(hours=2)).isoformat(), "no link here, really.", False),
        ("2026-05-01T10:00:00", "https://x.example", False),  # naive: ignored
        ("not a date", "https://x.example", False),
        (True, "https://x.example", False),
        (None, "https://x.example", False),
    ],
)
def test_new_account_link(joined: object, text: str, fires: bool) -> None:
    """New accounts (younger than 24 h at sent_at) posting a link are flagged."""
    engine = _engine(NEW_ACCOUNT)
    metadata = {} if joined is None else {"sender_joined_at": joined}
    assert (_ids(engine, text, metadata=metadata) == ["p.new"]) is fires


@pytest.mark.parametrize(
    ("strikes", "fires"), [(3, True), (10, True), (2, False), ("5", False), (True, False)]
)
def test_repeat_offender(strikes: object, fires: bool) -> None:
    """sender_strikes >= min_strikes escalates; non-integers are ignored."""
    engine = _engine(STRIKES)
    assert (_ids(engine, "hi", metadata={"sender_strikes": strikes}) == ["p.strikes"]) is fires


def test_helpers() -> None:
    """Boundary characters, link detection and metadata timestamps behave as documented."""
    assert is_boundary_char("a")
    assert is_boundary_char("9")
    assert is_boundary_char("é")
    assert not is_boundary_char("中")
    assert not is_boundary_char("ー")  # katakana: an unspaced script
    assert not is_boundary_char(" ")
    assert contains_link("go to https://x.y now")
    assert not contains_link("version 1.2.3")
    assert metadata_timestamp("2026-01-01T00:00:00+08:00") == datetime(2025, 12, 31, 16, tzinfo=UTC)
    assert metadata_timestamp(0) == datetime(1970, 1, 1, tzinfo=UTC)
    assert metadata_timestamp(-5) is None
    assert metadata_timestamp(1.5) is None
