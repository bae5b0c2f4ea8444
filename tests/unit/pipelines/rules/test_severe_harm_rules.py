"""The severe-harm rules of the default set: what each catches and the ordinary talk it leaves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleAction, Severity
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.severe_harm import is_severe

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENGINE = RuleEngine(default_ruleset())

# rule id -> (texts it must fire on, near-miss texts it must not fire on)
SEVERE_CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "en.threat.direct": (
        (
            "I will kill you",
            "I\u2019ll kill you tonight",
            "im gonna stab u",
            "if you show up again i'm going to fucking murder you",
            "we're going to shoot you dead",
            "say that once more and i'll break your jaw",
            "i'll put a bullet in your head",
            "I'LL HURT YOU",
            "i w i l l  k i l l  y o u",
            "i'll k1ll y0u",
            "you're going to die tonight",
            "i'll burn your house down",
            "i will find you and kill you",
            "i'm going to end your life",
            "im going to find you and beat you until you cant walk",
        ),
        (
            "I will kill this bug",
            "you will kill it on stage",
            "i could kill for a coffee",
            "shoot me a message when you land",
            "i'll shoot you an email later",
            "i'll cut you a slice of cake",
            "i'm gonna beat you at chess",
            "i will never hurt you",
            "i'm not going to kill you",
            "i'll find you at the party",
            "this habit will end your life early, quit smoking",
            "this game is killing me",
            "the butcher will cut the ribs for you",
            "i will beat you at chess tonight",
        ),
    ),
    "en.threat.family": (
        (
            "i'll kill your whole family",
            "i am going to hurt your kids",
            "i'm gonna murder you and your wife",
        ),
        (
            "i'll shoot your family photos next week",
            "i'll cut your kids' hair on sunday",
            "i love your family",
        ),
    ),
    "en.threat.veiled": (
        (
            "I know where you live",
            "i found out where your kids go to school",
            "better watch your back",
            "sleep with one eye open tonight",
            "your days are numbered",
            "you're a dead man",
            "it'd be a shame if something happened to your mom",
            "something bad might happen to you",
            "i'll hunt you down",
            "you won't live to see tomorrow",
            "nice school, would be a shame if someone was waiting for you at the gate",
            "nice house, shame if it burned down with your kids inside",
            "your kids walk home alone at 3pm right? would be a shame if something happened",
            "don't come to school tomorrow if you want to live, trust me",
            "Keep talking and see what happens when I show up at your job.",
            "one more word and i'll put you six feet under",
            "nice car. shame if the brakes failed on the highway",
            "I'm going to post your address and your ugly face everywhere",
            "snitches get stitches, and your little brother is first",
            "i'll dox you",
            "Ban me one more time and I'm coming to your house with a bat.",
            "coming for u tonight",
            "You won't see me coming.",
        ),
        (
            "i know where you work",
            "you're dead to me",
            "watch your step on the ice",
            "my cat is so cute",
            "police said the man was found dead at home",
            "the days are getting shorter",
            "it would be a shame if someone missed the party",
            "shame if it burned down, the old mill was pretty",
            "if you want to live longer, eat more vegetables",
            "your kids were so cute at the recital, shame if it rains on sports day",
            "keep talking, i'm listening",
            "the brakes failed on my bike last week",
            "show up at your job interview early",
            "post your address in the form so we can ship it",
            "i'm going to share your post, love it",
            "i'm coming to your house with a cake",
            "coming for dinner tonight",
        ),
    ),
    "zh.threat.direct": (
        (
            "我要杀了你",
            "我迟早弄死你",
            "老子今晚就砍死你",
            "我會殺了你",
            "我 要 弄 死 你",
            "我会打断你的腿",
            "我要砍你",
            "我会让你生不如死",
            "信不信我把你家房子烧了",
            "明天我带刀去学校,谁惹我谁死",
            "周六去商场放个💣",
            "明天去学校🔫突突突",
            "我要去你家放火",
        ),
        (
            "我要杀了这个bug",
            "他杀了一条鱼",
            "游戏里我杀了你三次",
            "我打死也不去",
            "抱歉打断你的话",
            "我来砍价",
            "这病让他生不如死",
            "我把你的车借走了",
            "烧了一壶开水",
            "带刀叉去野餐",
            "商场在放烟花",
            "去学校开家长会",
        ),
    ),
    "zh.threat.family": (
        (
            "小心我杀你全家",
            "我要弄死你的孩子",
            "信不信我砍死你老婆",
            "我會讓你全家付出代價",
            "让你全家都烧死",
        ),
        (
            "你全家都很好客",
            "我去你家吃饭",
            "杀鱼要先去鳞",
            "让你全家都开心",
            "让你家人放心",
        ),
    ),
    "zh.threat.words": (
        ("我弄死你", "nongsini", "shaniquanjia", "我要sha了你"),
        ("弄丢了你的书", "我想死你了", "游戏里我杀了你三次", "我要吃了你的薯条"),
    ),
    "zh.threat.veiled": (
        (
            "我知道你住哪",
            "我已经查到你家地址了",
            "走夜路小心点",
            "你给我等着!",
            "你等着瞧",
            "有你好看的!",
            "你死定了",
            "别让我在外面碰到你",
            "你家地址我已经查到了,等死吧",
            "已经开盒了,你的身份证号马上挂出来",
            "信不信我人肉你",
            "兄弟们人肉他",
            "我已经查到你公司地址了,好好想想后果",
            "等着吧,出门小心被车撞",
            "小心你孩子上学的路上出点意外",
            "你妈出门最好带保镖",
            "你老婆孩子在哪上学我都知道",
            "已开盒,手机号身份证都在这,大家随意",
            "把他电话号码挂出来,大家一起轮流打",
        ),
        (
            "你给我等着,我马上到",
            "没有你好看!",
            "出门小心点哦",
            "我知道你在哪上班",
            "我死定了,作业没写",
            "盲盒开盒视频来了",
            "你家地址发我一下,寄快递",
            "你们公司地址发我一下",
            "出门小心点,路上滑",
            "想想后来怎么办",
            "小心你孩子上学路上别摔倒",
            "出门最好带把伞",
            "你在哪上学我不知道",
            "盲盒开盒视频",
            "把他电话号码发我一下",
        ),
    ),
    "en.self_harm.intent": (
        (
            "i want to kill myself",
            "I want to end it all",
            "i don't want to live anymore",
            "im going to end my life tonight",
            "i've been thinking about suicide a lot",
            "everyone would be better off without me",
            "i wish i was dead",
            "i'm so suicidal",
            "i've been cutting myself again",
            "i just want to die",
            "i want to kms",
            "by the time you read this i'll be gone",
            "i want to k1ll myself",
            "i'm so tired of living",
            "i'm better off dead",
            "no one would notice me if i disappeared",
            "suicide is the only way out",
            "he keeps telling me to kill myself and i think i will kill myself",
            "i told him i want to kill myself",
        ),
        (
            "this level is killing me",
            "i want to end the game early",
            "i'm gonna die lol this is so funny",
            "i hurt myself playing football",
            "suicidal thoughts can be a side effect of this medicine",
            "i don't want to live in a big city",
            "i ran 5 kms today",
            "suicide prevention week starts monday",
            "i don't want to die",
            "i'm tired of living in this city",
            "i'm done with life admin for today, taxes filed",
            "mods, this user keeps telling me to kill myself, please help",
            "someone said i should kill myself in the comments",
        ),
    ),
    "zh.self_harm.intent": (
        (
            "我真的想死了",
            "我不想活了",
            "我想自杀",
            "我想跳楼",
            "我又自残了",
            "活着没意思",
            "我死了你们会更好",
            "我写好遗书了",
            "我还不如死了算了",
            "我不想活下去了",
            "我已经攒了很多安眠药",
            "真想一了百了",
            "希望明天再也不要醒来",
            "想从楼顶跳下去",
        ),
        (
            "我想死你了",
            "想死我了宝贝",
            "女子割腕被救",
            "热死了",
            "他结束了自己的生命",
            "我从来不想自杀",
            "明天要早起,别睡过头醒不来",
            "蹦极从桥上跳下去好刺激笑死我了",
        ),
    ),
    "en.self_harm.incitement": (
        (
            "just kill yourself",
            "kys loser",
            "go kill urself",
            "do us all a favour and kill yourself",
            "why don't you hang yourself",
            "just die already",
            "nobody would miss you if you died",
            "the world would be better without you",
            "k.y.s",
            "i'm telling you to kys",
            "do everyone a favour and jump off a bridge",
            "drink bleach lol",
            "nobody likes you. jump off a bridge",
            "the world is better without you",
            "k y s",
            "just go commit sewer slide",
            "you should take a toaster bath",
            "you should go drink bleach",
            "someone told me to kys, so now i'm telling you: kys",
            "kill yourself",
            "kys loser",
            "do everyone a favor and end it",
            "take the whole bottle of pills next time and do it right",
            "maybe try forgetting to breathe, permanently",
            "Drink bleach and end it, loser.",
            "an hero yourself",
            "sewer slide is ur only option lol",
        ),
        (
            "someone in lobby told me to kys, how do i report them",
            'he said "kill yourself" to me in dms',
            "don't kill yourself over homework",
            "we jumped off a bridge into the lake last summer",
            "people who commit suicide often show warning signs",
            "don't drink bleach, it is poison",
            "keys",
            "you'll kill yourself on that ladder",
            "this boss will kill you",
            "i just die inside when he sings",
            "don't kill yourself studying",
            "i'd kill myself laughing",
            "do everyone a favor and end the meeting early",
            "remember to breathe",
            "don't drink bleach, it's poison",
            "suicide is never the only option, call a helpline",
        ),
    ),
    "zh.self_harm.incitement": (
        (
            "你去死吧",
            "你怎么还不去死",
            "劝你早点自杀",
            "赶紧去跳楼",
            "你死了算了",
            "建议你直接跳楼",
            "劝你还是去死吧",
            "建议你今晚从楼上跳下去,别再出来丢人了",
            "建议原地自鲨",
            "建议你原地去世",
            "割腕都不会吗,要不要我教你",
            "吃安眠药吧,一瓶就够了",
            "你死了大家都会松一口气",
            "天台见,记得跳下来",
            "你这种人怎么还不去死?",
        ),
        (
            "我打死也不去",
            "你去死亡谷玩吗",
            "别去跳楼机那里排队了",
            "我死了算了",
            "建议你直接跳过这关",
            "我原地去世了,太可爱了",
            "笑到原地去世",
            "睡不着就吃安眠药吧",
            "这题都不会吗,要不要我教你",
            "考完试大家都松一口气",
            "天台见,一起看星星",
            "你怎么还不去睡",
        ),
    ),
    "en.sexual_exploitation.sextortion": (
        (
            "send more pics or i'll leak them to your family",
            "i will post your nudes online",
            "pay me $500 or everyone sees the video",
            "everyone will see your nudes",
            "i have your nudes",
            "send me videos unless you want me to send them to your boss",
            "I recorded our call. Send 200 dollars by tonight or your family sees everything.",
            "i have your private photos and i'll send them unless you pay",
        ),
        (
            "send me the pics or i'll forget",
            "please don't share your private photos online",
            "i'll send your photos from the trip",
            "send me nudes",
            "pay me back or i'll tell mom",
            "send 200 dollars by tonight or the deal is off",
            "i have your photos from the trip, want them?",
        ),
    ),
    "en.sexual_exploitation.grooming": (
        (
            "how old are you? send me a pic",
            "don't tell your parents about us",
            "this is our little secret, send pics",
            "how old r u? wanna video chat with no clothes on",
        ),
        (
            "how old are you? i'm 30",
            "how old are you? i take off my shoes at the door",
            "don't tell your mom about the surprise party",
            "sex education class starts at 9",
        ),
    ),
    "en.sexual_exploitation.minors": (
        (
            "selling cp links",
            "looking for underage nudes",
            "you're 13? send nudes",
            "anyone trading child porn",
            "nudes of a 14 yo",
        ),
        (
            "child porn is a crime and must be reported",
            "sex education for kids",
            "share kid pics from the party",
            "my son is 13 and loves football",
            "you're 12 hours ahead of me",
        ),
    ),
    "zh.sexual_exploitation.sextortion": (
        (
            "不给钱就把你的裸照发出去",
            "我会曝光你的不雅视频",
            "我把你的艳照发到群里",
            "不转钱的话就把视频公开",
            "你的照片我都P好了,不转账就发到你们学校表白墙",
            "不跟我睡我就把你的事情告诉全公司",
            "你的视频我录下来了,不继续脱我就发到网上",
            "视频我录下来了,明天之前打钱,否则发给你所有好友",
            "不想你的照片被全🌏看到就转💰",
        ),
        (
            "不要把裸照发到网上",
            "我把你的照片发给你了",
            "明星艳照被曝光",
            "不给我发照片就算了",
            "照片修好了,不付尾款就不发原图",
            "不跟我吃饭我就自己去了",
            "视频我录下来了,晚点发群里",
            "视频我录好了,明天发你",
            "照片打印好了,明天给你",
        ),
    ),
    "zh.sexual_exploitation.grooming": (
        ("你几岁了?发张裸照", "别告诉你爸妈我们见面的事"),
        ("你几岁了?", "别告诉你妈生日惊喜"),
    ),
    "zh.sexual_exploitation.minors": (
        ("出售幼女色情视频", "有没有未成年的裸照", "学生妹援交", "我才13岁,你要裸照吗"),
        ("打击儿童色情", "初中生学习资料", "卖初中生教材", "我13岁了,喜欢踢球"),
    ),
    "zh.self_harm.incitement_words": (
        ("去si吧", "你去si吧!", "快去屎", "赶紧去si"),
        ("去世", "我们去四川吧", "快去吃饭"),
    ),
    "en.threat.mass_violence": (
        (
            "I'm bringing my dad's gun to school tomorrow, don't come to 3rd period.",
            "s.h.o.o.t.i.n.g up the mall this saturday",
            "there is a bomb at the stadium, you all die tonight",
        ),
        (
            "the police found a bomb at the stadium",
            "this bath bomb from the mall smells great",
            "we're shooting a video at school",
            "bringing my knife to the cooking class",
        ),
    ),
}

# Ordinary talk no severe rule may touch: idioms, cooking, games, medicine, sex education, news.
ORDINARY = (
    "this game is killing me",
    "I could kill for a coffee",
    "shoot me a message",
    "我要杀了这个bug",
    "the butcher showed us how to debone a chicken and cut the ribs",
    "杀鸡要先放血",
    "my cat is so cute",
    "the doctor explained the side effects and the risk of overdose",
    "sex education should start early and talk about consent",
    "Police say a man was stabbed in the city centre last night",
    "警方通报:一男子持刀伤人已被控制",
    "I'm dying to see that movie",
    "we killed it at the concert",
    "笑死我了,这个视频太好笑",
    "我饿死了",
    "新闻:一名女子跳楼身亡,警方正在调查",
)


def _hits(text: str) -> dict[str, tuple[str, Severity, RuleAction]]:
    outcome = ENGINE.evaluate(ChatMessage("m-1", "g-1", "u-1", text, SENT_AT))
    return {hit.rule_id: (hit.category, hit.severity, hit.action) for hit in outcome.hits}


@pytest.mark.parametrize(
    ("rule_id", "text"),
    [(rule_id, text) for rule_id, (fires, _) in SEVERE_CASES.items() for text in fires],
)
def test_severe_rule_fires(rule_id: str, text: str) -> None:
    """The severe rule fires on its example."""
    assert rule_id in _hits(text)


@pytest.mark.parametrize(
    ("rule_id", "text"),
    [(rule_id, text) for rule_id, (_, misses) in SEVERE_CASES.items() for text in misses],
)
def test_severe_rule_ignores_near_miss(rule_id: str, text: str) -> None:
    """The severe rule does not fire on a benign text that resembles its example."""
    assert rule_id not in _hits(text)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_talk_has_no_severe_hit(text: str) -> None:
    """Idioms, cooking, medicine, sex education and news hit no severe-harm rule."""
    assert not [category for category, _, _ in _hits(text).values() if is_severe(category)]


def test_every_severe_rule_has_cases() -> None:
    """A severe-category rule added to default.toml without examples here fails this test."""
    severe = {rule.meta.id for rule in default_ruleset().rules if is_severe(rule.meta.category)}
    assert severe == set(SEVERE_CASES)


def test_own_intent_flags_and_incitement_blocks() -> None:
    """Self-harm intent is a critical flag (never a block rule); telling others to do it blocks."""
    assert _hits("i want to kill myself")["en.self_harm.intent"] == (
        "self_harm",
        Severity.CRITICAL,
        RuleAction.FLAG,
    )
    assert _hits("我不想活了")["zh.self_harm.intent"][2] is RuleAction.FLAG
    assert _hits("go kill yourself")["en.self_harm.incitement"][0] == "self_harm_incitement"
    assert _hits("你去死吧")["zh.self_harm.incitement"][2] is RuleAction.BLOCK


def test_minors_are_critical_blocks() -> None:
    """Anything involving minors is a critical block in its own category."""
    assert _hits("selling cp links")["en.sexual_exploitation.minors"] == (
        "sexual_exploitation_minors",
        Severity.CRITICAL,
        RuleAction.BLOCK,
    )
    assert _hits("有没有未成年的裸照")["zh.sexual_exploitation.minors"][2] is RuleAction.BLOCK


def test_regexes_also_search_leetspeak_readings() -> None:
    """A regex rule matches a leetspeak spelling only through the leet reading."""
    assert "en.threat.direct" in _hits("i'll k1ll y0u")
    assert "en.threat.direct" not in _hits("i'll kiIl-y0-u bug")
