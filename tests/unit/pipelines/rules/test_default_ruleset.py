"""Every rule of the shipped default set fires on an example and not on a benign near-miss."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.messages import ChatMessage
from pipelines.rule_hits import Severity
from pipelines.rules import RuleEngine, default_ruleset
from tests.unit.pipelines.rules.test_severe_harm_rules import SEVERE_CASES

SENT_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENGINE = RuleEngine(default_ruleset())

# rule id -> (texts it must fire on, near-miss texts it must not fire on); the severe-harm rules
# have theirs in test_severe_harm_rules.py.
CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "en.hate.slur": (
        (
            "you filthy faggot",
            "CHINKS go home",
            "f@gs shouldn't be allowed on the mic",
        ),
        (
            "he speaks chinese",
            "spicy food",
            "fagioli soup recipe",
        ),
    ),
    "zh.hate.slur": (("滚回去吧黑鬼", "这些支那人", "穆狗"), ("黑色的鬼屋很吓人", "支持那个人")),
    "en.offensive.profanity": (
        ("what the fuck", "you ASSHOLE", "stfu"),
        ("this class rocks", "shitake mushrooms", "cocktail"),
    ),
    "en.offensive.obfuscated": (
        ("f*ck you", "what the f**k", "sh!t happens", "b1tch", "s.u.c.k m.y d.i.c.k noob"),
        ("fukushima trip", "a shirt", "fuchsia", "this vacuum can suck my whole rug up"),
    ),
    "en.offensive.insult": (
        ("you moron", "total dumbass", "you're a waste of oxygen"),
        ("moronic", "oxymoron", "oxygen tanks"),
    ),
    "en.harassment.death_wish": (
        (
            "I hope your whole family gets cancer and dies slowly",
            "d.i.e in a f.i.r.e",
            "go die in a fire",
        ),
        ("i hope you get better soon", "the hero dies in a fire at the end of the film"),
    ),
    "zh.hate.group_smear": (
        (
            "河南人都是骗子",
            "外地佬全是小偷",
            "残疾人就是社会的累赘",
            "基佬恶心死了",
            "小鬼子都该死光",
            "阿三国的人都不洗澡",
            "东北人全是混混",
            "你个黑人,滚回你的非洲去",
        ),
        (
            "我们班的人都是学霸",
            "骗子都是这样说的",
            "这个人就是累赘",
            "残疾人也是社会的一分子",
            "这道菜真恶心",
            "我家有个小柜子",
            "三国演义真好看",
            "东北人都是热心肠",
            "他回老家去了",
        ),
    ),
    "zh.offensive.profanity": (
        (
            "你个傻逼",
            "他妈的烦死了",
            "草泥马",
            "你马没了",
            "你🐴没了",
            "人zha",
            "你死全家",
            "你麻痹的,再叫一声试试",
            "特么的你是不是有病",
            "你这个沙比真是没救了",
            "这个女表子又开播了",
            "婊子",
        ),
        (
            "他妈妈做饭很好吃",
            "傻瓜相机",
            "出生日期",
            "白吃白喝",
            "麻痹大意要不得",
            "特别好吃",
            "沙滩比赛",
            "手表坏了",
            "表姐来了",
        ),
    ),
    "en.sexual.solicitation": (
        (
            "send me nudes",
            "wanna hook up tonight?",
            "sex chat anyone",
            "hey sexy how much for a night",
            "i'm touching myself thinking about you rn",
            "nice legs, what else are you hiding under that skirt",
            "dm me for my onlyfans, nudes for $5",
            "onlyfans leak pack, cheap",
            "ur b00bs r hot show me more",
            "nice 🍑 wanna sit on my 🍆",
            "wanna see my d!ck?",
            "Nice body. Show me more of it in DMs",
        ),
        (
            "send me the notes",
            "can you hook up the printer",
            "sex education class",
            "how much for a night at the hotel by the station?",
            "what are you wearing to the wedding",
            "she quit onlyfans last year",
            "the artist is selling prints for $5",
            "your body needs rest, get some sleep",
            "sit on my left at dinner",
            "wanna see my new dog?",
            "nice body of work, show me the rest of the portfolio",
        ),
    ),
    "zh.sexual.solicitation": (
        ("同城约炮", "有没有人裸聊", "美女多少钱一晚"),
        ("约会吃饭", "包子很好吃", "这家酒店一晚上多少钱"),
    ),
    "zh.sexual.hookup": (
        (
            "约吗,今晚开房",
            "开房约不约",
            "今晚一起开房吗",
            "美女约吗?一晚多少钱",
            "美女约吗",
            "想不想看我的🐔🐔",
            "你裙子下面穿的什么颜色",
            "发个sè图来看看",
            "來我家,我讓你爽",
            "晚上出来开房吗,价钱好商量",
            "约p吗,今晚有空",
            "美女,发几张裸照给我看看",
            "约吗?我就在你附近,一晚五百",
        ),
        (
            "周末打球约吗",
            "出差到了,先去酒店开房",
            "酒店一晚多少钱",
            "我家养的鸡下蛋了",
            "这条裙子里面有衬裙吗",
            "这个游戏让你爽到停不下来",
            "彩色图书",
            "出来吃饭吗",
            "ppt做完了吗",
            "发几张风景照给我看看",
            "约吗?周末一起去爬山",
        ),
    ),
    "spam.free_money_link": (
        ("FREE MONEY at https://scam.example", "earn $500 per day www.easy.example"),
        ("free money would be nice", "read https://docs.example for details"),
    ),
    "zh.spam.invoice": (
        ("代开发票\uff0c价格优惠", "专业代开增值税发票"),
        ("请帮我开发票", "发票已经寄出"),
    ),
    "zh.spam.brushing": (("招兼职刷单日结", "刷单返利了解一下"), ("兼职老师招聘", "刷卡消费")),
    "zh.spam.easy_money": (
        (
            "在家躺赚",
            "每天日赚三百",
            "家人们,日入过千",
            "幣圈內幕,一天翻倍,私我",
        ),
        (
            "赚钱不容易",
            "日子过得很快",
            "一天天过得真快",
        ),
    ),
    "zh.spam.fake_engagement": (
        ("代刷粉丝点赞,一元一千", "专业刷粉刷赞"),
        ("今天涨粉了", "刷视频刷到好笑的"),
    ),
    "spam.repeated_money": (
        ("$10 $20 $30 just today, dm me", "￥100 ¥200 ￥300 加微信", "100元 200元 300块 私聊"),
        (
            "costs $10 or $20",
            "100元",
            "Price list: haircut $25, beard trim $10, both for $30",
            "单人间180元, 双人间220元, 早餐30元",
        ),
    ),
    "en.spam.easy_money": (
        (
            "Earn $5000/week from home, no experience needed, message me on WhatsApp",
            "make $$ from home, dm me for details",
            "making $300 a day with this one app",
        ),
        ("I earn $20 an hour at the cafe", "working from home today", "make money moves"),
    ),
    "en.spam.engagement_trading": (
        ("sub4sub and free giftcards, check out my channel", "follow 4 follow?", "l4l"),
        ("subway for lunch", "4 for 4 on free throws", "follow the link in the docs"),
    ),
    "zh.spam.illegal_offer": (
        (
            "🈶需要办证的私我",
            "澳门首家线上赌场上线啦",
            "出售yin秽视频,百部打包20元",
            "出售各类证件,身份证、驾照、学历证书,包过",
            "出售仿真qiang、气枪,走物流",
            "出大麻,同城闪送",
            "黑户也能下款,不看征信",
            "出 dà má,飞机:@weed_cn",
        ),
        (
            "去政务大厅办证",
            "澳门旅游攻略",
            "举报淫秽视频",
            "身份证丢了怎么补办",
            "这把枪是仿真的道具吗",
            "征信报告怎么查",
            "大妈出门买菜",
        ),
    ),
    "zh.ad.add_contact": (
        ("有意者加微信", "详情加v", "加qq聊"),
        ("微信支付很方便", "加油加油", "加vip会员"),
    ),
    "ad.wechat_id": (
        ("微信: abc12345", "vx\uff1ahello_2024", "wechat id xy9988"),
        ("my wechat account is down", "微信号码忘了"),
    ),
    "ad.qq_id": (("qq: 123456789", "扣扣 88889999", "qq群 12345"), ("qq音乐很好听", "qq 12")),
    "ad.cn_mobile": (
        ("call 13812345678", "电话138-1234-5678", "手机\uff1a15900001111"),
        ("order 12345678901", "id 138123456789", "1381234567"),
    ),
    "en.hate.dehumanizing": (
        (
            "Disabled people are a drain on society and should never have been born.",
            "immigrants are parasites",
            "muslims should be deported",
            "(((they))) run everything",
            "14 words, the great replacement is real",
            "Hitler was right about the jooz",
            "Trans people are mentally ill freaks",
            "typical Jew, first one to ask who's holding the fund",
            "black players always rage quit, it's in their genes",
            "go back to your 🐒 country",
            "just a bunch of j3ws running the server",
        ),
        (
            "rats are vermin",
            "immigrants are a big part of the workforce",
            "((hugs))",
            "we scored 14 points",
            "the great wall is huge",
            "jews celebrate hanukkah in winter",
            "typical monday",
            "it's in the genes, my whole family is tall",
            "go back to your seat please",
        ),
    ),
    "en.spam.illegal_goods": (
        (
            "Selling Xanax, Oxy and coke, discreet shipping, DM for the menu.",
            "meth for sale, dm",
            "Fake passports and driver's licenses, any country, message me.",
            "fresh fullz w/ cvv, $10 each",
            "FREE V-BUCKS GENERATOR 👉 vbux-free(dot)xyz",
            "free robux generator, no survey",
        ),
        (
            "my doctor prescribed xanax for my anxiety",
            "coke or pepsi?",
            "the passport office is closed today",
            "i lost my card, what is a cvv",
            "free v-bucks are in the battle pass",
            "a robux is worth about a cent",
        ),
    ),
    "harassment.dogpiling": (
        (
            "大家一起去他主页骂他,骂到他删号为止",
            "兄弟们冲她评论区",
            "everyone go spam his dms",
            "你脑子被驴踢了吧",
            "raid his channel tonight and flood the chat until he quits streaming for good",
            "everyone report and flame @luna_plays, make her delete her acc",
            "dogpile on this clown in the replies",
        ),
        (
            "大家一起去他主页点赞",
            "everyone go check his new video",
            "我脑子被门夹了",
            "raid his channel after our stream, he's cool",
            "flood the chat with hype emotes",
        ),
    ),
    "zh.harassment.death_wish": (
        (
            "祝你全家🔥葬场一日游",
            "祝你早日暴毙",
            "你爹死了吗你这么狂",
        ),
        (
            "祝你全家幸福",
            "我爹死了好多年了",
            "祝你早日康复",
        ),
    ),
    "spam.phishing": (
        (
            "I accidentally reported you, message the admin and give him your password to fix it",
            "【安全中心】您的账号存在异常,请立即登录以下网址验证,否则将被冻结",
            "我是你领导,换了新号,急需转两万到这个账户",
            "您好我是快递客服,您的包裹丢了,加我QQ办理理赔",
            "戳这里领红包:hongbao点top/xx,手慢无",
        ),
        (
            "never give anyone your password",
            "admins will never ask you to send your 2fa code",
            "账号异常怎么办",
            "领导换了新手机",
            "包裹丢了,快递说会赔",
            "过年领红包啦",
        ),
    ),
}

NEW_ACCOUNT = {"sender_joined_at": (SENT_AT - timedelta(hours=1)).isoformat()}
OLD_ACCOUNT = {"sender_joined_at": (SENT_AT - timedelta(days=30)).isoformat()}


def _hit_ids(text: str, metadata: Mapping[str, object] | None = None) -> set[str]:
    message = ChatMessage("m-1", "g-1", "u-1", text, SENT_AT, metadata or {})
    return {hit.rule_id for hit in ENGINE.evaluate(message).hits}


def test_every_default_rule_has_cases() -> None:
    """A rule added to default.toml without examples here fails this test."""
    profile_rules = {"profile.new_account_link", "profile.repeat_offender"}
    assert set(default_ruleset().ids()) == set(CASES) | set(SEVERE_CASES) | profile_rules


@pytest.mark.parametrize(
    ("rule_id", "text"),
    [(rule_id, text) for rule_id, (fires, _) in CASES.items() for text in fires],
)
def test_rule_fires(rule_id: str, text: str) -> None:
    """The rule fires on its example."""
    assert rule_id in _hit_ids(text)


@pytest.mark.parametrize(
    ("rule_id", "text"),
    [(rule_id, text) for rule_id, (_, misses) in CASES.items() for text in misses],
)
def test_rule_ignores_near_miss(rule_id: str, text: str) -> None:
    """The rule does not fire on a benign text that resembles its example."""
    assert rule_id not in _hit_ids(text)


def test_new_account_link_rule() -> None:
    """A one-hour-old account posting a link is flagged; a month-old one, or no link, is not."""
    assert "profile.new_account_link" in _hit_ids("check https://deal.example", NEW_ACCOUNT)
    assert "profile.new_account_link" not in _hit_ids("check https://deal.example", OLD_ACCOUNT)
    assert "profile.new_account_link" not in _hit_ids("hello everyone", NEW_ACCOUNT)


def test_repeat_offender_rule() -> None:
    """Three strikes escalate; two do not."""
    assert "profile.repeat_offender" in _hit_ids("hello", {"sender_strikes": 3})
    assert "profile.repeat_offender" not in _hit_ids("hello", {"sender_strikes": 2})


@pytest.mark.parametrize(
    "text",
    [
        "Hey, are we still meeting at 8pm for the game?",
        "今天天气很好\uff0c我们去公园散步吧。",
        "Great assist! That was a classic play.",
        "我们班的同学明天去春游",
        "The meeting is at https://meet.example/abc",
    ],
)
def test_ordinary_chat_has_no_hits(text: str) -> None:
    """Everyday English and Chinese chat triggers no rule."""
    assert _hit_ids(text) == set()


def test_decisive_and_escalating_defaults() -> None:
    """Slurs, clear scams and threats against a family block at once; a direct threat flags."""
    slur = ENGINE.evaluate(ChatMessage("m", "g", "u", "faggot", SENT_AT))
    assert slur.is_decisive
    threat = ENGINE.evaluate(ChatMessage("m", "g", "u", "我要杀了你", SENT_AT))
    assert {hit.severity for hit in threat.hits} == {Severity.CRITICAL}
    assert not threat.is_decisive
    family = ENGINE.evaluate(ChatMessage("m", "g", "u", "我要杀你全家", SENT_AT))
    assert family.is_decisive
    scam = ENGINE.evaluate(ChatMessage("m", "g", "u", "兼职刷单 日结", SENT_AT))
    assert scam.is_decisive
