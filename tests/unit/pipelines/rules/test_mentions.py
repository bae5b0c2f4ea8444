"""Quoted mentions: abuse quoted in a report, condemnation or warning does not count as said."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.mentions import blank_spans, is_mention_frame, mentioned_spans

ENGINE = RuleEngine(default_ruleset())
SENT_AT = datetime(2026, 5, 1, tzinfo=UTC)


def _ids(text: str) -> set[str]:
    return {h.rule_id for h in ENGINE.evaluate(ChatMessage("m", "g", "u", text, SENT_AT)).hits}


def _quoted(text: str) -> list[str]:
    canonical = canonicalize(text).text
    return [canonical[a:b].strip() for a, b in mentioned_spans(canonical)]


def test_quotes_in_a_frame_are_spans_and_apostrophes_are_not_quotes() -> None:
    """Single quotes open at a word's start and close at its end, so "i'll" stays inside the
    span and "don't" opens nothing; double and corner quotes count; no frame, no span."""
    assert _quoted("he wrote 'i'll stab you' under my post") == ["'i'll stab you'"]
    assert _quoted('someone said "die" to me, reported') == ['"die"']
    assert _quoted("他私信我说「去死」，已经举报了") == ["「去死」"]
    assert _quoted("don't worry, it's fine") == []
    assert _quoted("'kys' lol") == []
    assert not is_mention_frame("'kys' lol")


def test_a_warning_names_a_scam_but_never_a_group() -> None:
    """What a warning calls a scam is a mention when it is a message, link or ad; a smear of a
    group shaped the same way is not."""
    assert _quoted("psa: the free nitro dm is a scam") == ["the free nitro dm"]
    assert _quoted("提醒大家：兼职刷单的广告是骗子") == ["兼职刷单的广告"]
    assert _quoted("提醒大家：河南人都是骗子") == []


def test_blank_spans_replaces_each_span_with_one_space() -> None:
    """Spans become single spaces; overlapping ones are blanked once, as their union (a short
    span that starts where a longer quote starts must not leave the rest of the quote)."""
    assert blank_spans("ab 'cd' ef", [(3, 7)]) == "ab   ef"
    assert blank_spans("abcdef", [(1, 3), (2, 4)]) == "a ef"
    assert blank_spans("abcdefgh", [(2, 4), (2, 7)]) == "ab h"


@pytest.mark.parametrize(
    ("text", "rule", "said"),
    [
        ("a guy in ranked wrote 'i'll stab you', reported", "en.threat.direct", "i'll stab you"),
        ("please stop saying 'retard', it hurts people", "en.offensive.insult", "you retard"),
        ("it's not ok to tell someone to go die", "en.self_harm.incitement", "go die"),
        ("他私信我说“我要弄死你”，已经举报了", "zh.threat.direct", "我要弄死你"),
        ('mod note: "kys" jokes are not allowed here', "en.self_harm.incitement", "kys"),
        ("timed out someone for typing 'go die' in chat", "en.self_harm.incitement", "go die"),
        ("got a weird dm 'i'll stab you' from a random", "en.threat.direct", "i'll stab you"),
        ("the word 'retard' is used in music", "en.offensive.insult", "you retard"),
        ('别信"加微信领红包"的消息', "zh.ad.add_contact", "加微信领红包"),
        (
            "this guy kept asking me how much for a night, blocked him",
            "en.sexual.solicitation",
            "how much for a night",
        ),
        ("they called my cousin a chink at the bus stop, disgusting", "en.hate.slur", "you chink"),
        ("a user in voice said all fags should burn, reported", "en.hate.slur", "fags should burn"),
        (
            "we are not ok with the 'immigrants are rats' posts in general chat",
            "en.hate.dehumanizing",
            "immigrants are rats",
        ),
        ("how did the word filter miss 'chinks'? it is clearly a slur", "en.hate.slur", "chinks"),
        (
            "mods, this account keeps dming me 'send nudes' again",
            "en.sexual.solicitation",
            "send nudes",
        ),
        (
            'some kid told my brother "i know where you live", we called the police',
            "en.threat.veiled",
            "i know where you live",
        ),
        (
            "my cousin got 'you should unalive yourself' on her video, that's so not ok",
            "en.self_harm.incitement",
            "you should unalive yourself",
        ),
        ("reminder: 'kys' counts as encouraging self harm here", "en.self_harm.incitement", "kys"),
        ("typing 'go die' breaks rule 3 in this server", "en.self_harm.incitement", "go die"),
        ("please quit typing kys in general, it's not funny", "en.self_harm.incitement", "kys"),
        ("automod filtered my username but chink got through??", "en.hate.slur", "you chink"),
        ("有个号一直刷“加V领福利”，房管处理一下", "zh.ad.add_contact", "加V领福利"),
        ("so sick of people spamming kys in every lobby", "en.self_harm.incitement", "kys"),
        ("why is 'go die' still allowed in here?", "en.self_harm.incitement", "go die"),
        ("someone has 'kys' in their bio, report it", "en.self_harm.incitement", "kys"),
        ("can the mods please stop with the retard jokes", "en.offensive.insult", "retard jokes"),
        ("we should add kys to the word filter", "en.self_harm.incitement", "kys"),
        ("if a guy calls you a chink in voice just report him", "en.hate.slur", "you chink"),
        ("有人一直在弹幕说河南人都是骗子，房管处理", "zh.hate.group_smear", "河南人都是骗子"),
        ("有人在评论区骂楼主是傻逼，已举报", "zh.offensive.profanity", "傻逼"),
        ("收到个短信说账户异常让我加微信核实，肯定是诈骗", "zh.ad.add_contact", "加微信核实"),
        ("提醒一下，有人以刷单返利为名骗钱", "zh.spam.brushing", "刷单返利"),
        ("有人说新疆人都是小偷，这种言论太离谱", "zh.hate.group_smear", "新疆人都是小偷"),
        ("群里有人天天刷约炮的小广告，管理员管管", "zh.sexual.solicitation", "约炮"),
        ("管理，有个号在刷代开发票的广告", "zh.spam.invoice", "代开发票"),
        ("有人在评论区说东北人都是骗子，这种地域黑管管吧", "zh.hate.group_smear", "东北人都是骗子"),
        ("i reported the kys message in general", "en.self_harm.incitement", "kys"),
        ("banned someone for spamming the word chink in voice", "en.hate.slur", "you chink"),
        (
            "to the guy who told me to drink bleach: reported",
            "en.self_harm.incitement",
            "drink bleach",
        ),
        ("can automod catch k y s with dots too", "en.self_harm.incitement", "k y s"),
        ("why is retard not on the banned words list", "en.offensive.insult", "you retard"),
        (
            "someone in lobby said they'd shoot up the school, admins check the logs",
            "en.threat.mass_violence",
            "i'll shoot up the school",
        ),
        ("有人私信给我发了一堆去死吧，好难受", "zh.self_harm.incitement", "去死吧"),
        ("他在每个帖子下面都刷加V领福利，版主处理一下", "zh.ad.add_contact", "加V领福利"),
        ("being told to kys after every match gets old", "en.self_harm.incitement", "kys"),
        (
            "i got told 'nobody likes you' in the team chat, it stung",
            "en.harassment.demeaning",
            "nobody likes you",
        ),
        (
            "saw a comment saying no gays allowed in this server, mods please",
            "en.hate.dehumanizing",
            "no gays allowed in this server",
        ),
    ],
)
def test_a_quoted_mention_does_not_hit(text: str, rule: str, said: str) -> None:
    """The rule that fires on the words said stays quiet when they are quoted in a report or
    condemnation."""
    assert rule in _ids(said)
    assert rule not in _ids(text)


def test_abuse_outside_the_quote_still_hits() -> None:
    """Quoting a report does not excuse what the writer says around it."""
    assert "en.offensive.insult" in _ids("he called me 'a moron', well you're a moron too")
    assert "en.threat.direct" in _ids("someone wrote 'whatever', i'll stab you")
    assert "en.threat.direct" in _ids("the word 'mercy' is not in my vocabulary, i'll stab you")
    assert "zh.offensive.profanity" in _ids("有人说你是傻逼")  # no call on moderators: no frame
    # "mods" only frames a message that opens by addressing them; "got 'em" is no received quote
    assert "en.self_harm.incitement" in _ids("mods are useless, 'kys' all of you")
    assert "en.self_harm.incitement" in _ids("got 'em lol 'kys'")
    # a condemnation's object is a mention, not a comma's aftermath: "stop posting, kys"
    assert "en.self_harm.incitement" in _ids("stop posting, kys")
    # a complaint's frame does not excuse abuse outside what it names
    assert "en.self_harm.incitement" in _ids("kys, and report me if you want")
    assert "en.offensive.insult" in _ids("stop with the crying, you retard")
    assert "en.self_harm.incitement" in _ids("the amount of hate here, kys all of you")
    # a warning about scams does not excuse the contact it gives itself
    assert "zh.ad.add_contact" in _ids("防诈骗提醒，加微信abc123领补贴")
    # the writer's own words are never a mention: "i told you to ...", or after the message named
    assert "en.self_harm.incitement" in _ids("i told you to kys, reported or not")
    assert "en.self_harm.incitement" in _ids("reported the kys message lol, now kys")
    # naming an ad in a report leaves what the writer adds: the contact still hits
    assert "zh.ad.add_contact" in _ids("有人发约炮广告，举报了，想要的加我微信abc123")


def test_urgent_categories_keep_their_hits_in_mentions() -> None:
    """Someone quoted as saying they want to kill themselves may be in danger: the self-harm
    rule still fires and a person sees it."""
    assert "en.self_harm.intent" in _ids("my friend keeps saying 'i want to kill myself'")


def test_keyword_exempt_spans_leave_ordinary_senses() -> None:
    """A keyword rule's exempt span blanks the ordinary sense only: the slur elsewhere hits."""
    assert "en.hate.slur" not in _ids("we found a chink in their armour")
    assert "en.hate.slur" not in _ids("a chink of light under the door")
    assert "en.hate.slur" not in _ids("we cut faggots of birch for the bonfire")
    assert "en.hate.slur" in _ids("a chink in the armour, you chink")
