"""Chat-length spam and scams, hand-written templates labelled intent ``spam``.

The intent heads learned spam from SpamAssassin e-mails: long, with headers' vocabulary. A
one-line chat scam ("earn $500 a day from home, click here <link>", "线上赌场注册送88元")
looks little like them and scored as chat. These families give the heads the chat shapes of
get-rich-quick offers, fake giveaways, pills, gambling, loans, paid followers and click-bait
links, with many slot values each. Every template and slot value was written by hand for this
module (none from the adversarial dev set); the notice family of
:mod:`modelbuild.hard_negatives` (share buttons, group notices, red envelopes) is their benign
counterpart.
"""

from __future__ import annotations

from modelbuild.template_families import Family, TemplateLine, lines_of

__all__ = ["SPAM_FAMILIES", "spam_lines"]

_EN_LINKS = (
    "bit.ly/2kQ8xZ",
    "tinyurl.com/freecash7",
    "www.win-big-now.biz",
    "http://cheapdeal.top/x",
    "the link in my bio",
    "my profile",
    "www.goldprize.click",
)
_ZH_LINKS = ("http://t.cn/A6xYz", "dwz.cn/8kPq", "www.88fa.vip", "主页链接", "群公告里的链接")

SPAM_FAMILIES: tuple[Family, ...] = (
    Family(
        "en",
        "scam",
        (
            "{earn} from home, {cta} {link}",
            "{earn} with this one trick, {cta} {link}",
            "{free} giveaway: {cta} {link}",
            "win a {prize}! {cta} {link}",
            "buy {drug} {rx} at {link}",
            "dm me to {double} your {asset} in {hours}, guaranteed",
            "send {amount} {asset} and get {more} back, {cta} {link}",
            "{hot} in your area want to meet tonight, {cta} {link}",
            "cheap {followers} for sale, {cta} {link}",
            "congratulations, you won a {prize}! claim it at {link}",
            "{loan} approved in minutes, no credit check, {cta} {link}",
        ),
        {
            "earn": (
                "earn $500 a day",
                "make $3000 a week",
                "get paid $200 per hour",
                "quit your job and earn thousands",
            ),
            "cta": ("click here", "sign up at", "visit", "go to", "check", "register at"),
            "link": _EN_LINKS,
            "free": ("crypto", "bitcoin", "free skins", "gift card", "iphone", "steam wallet"),
            "prize": ("iphone 15", "free ps5", "$1000 gift card", "tesla", "free vacation"),
            "drug": ("viagra", "cialis", "weight loss pills", "xanax", "steroids"),
            "rx": ("with no prescription", "at 90% off", "shipped discreetly", "cheap"),
            "double": ("double", "triple", "10x"),
            "asset": ("money", "btc", "eth", "crypto", "usdt"),
            "hours": ("24h", "one day", "a week", "an hour"),
            "amount": ("0.1", "0.5", "1"),
            "more": ("1 btc", "double", "5 eth"),
            "hot": ("hot singles", "lonely girls", "hot moms", "sexy girls"),
            "followers": ("followers", "likes", "subscribers", "views"),
            "loan": ("a $5000 loan", "fast cash", "payday loan"),
        },
    ),
    Family(
        "zh",
        "scam",
        (
            "{casino}，注册送{amount}元",
            "点击链接领取{prize} {link}",
            "加微信{wx}，{earn}",
            "{loan}，无抵押当天到账，联系{wx}",
            "兼职刷单，{earn}，{contact}",
            "恭喜你中了{prize}，请点击{link}领取",
            "低价出售{goods}，{contact}",
            "{invest}，稳赚不赔，{contact}",
            "免费领取{prize}，名额有限，{link}",
        ),
        {
            "casino": ("澳门线上娱乐城", "真人百家乐", "线上棋牌", "体育彩票内部群", "新葡京"),
            "amount": ("88", "188", "588", "999"),
            "prize": ("红包", "iphone", "888元现金", "免费流量", "游戏皮肤", "会员卡"),
            "link": _ZH_LINKS,
            "wx": ("vx123456", "wx888", "QQ 5201314", "薇❤ abc999"),
            "earn": ("日赚三百", "月入过万", "一天五百不是梦", "在家轻松赚钱"),
            "loan": ("网贷秒批", "急用钱找我", "大学生贷款"),
            "contact": ("私聊我", "加我微信", "看我主页", "联系客服"),
            "goods": ("高仿名牌包", "游戏账号", "微信号", "发票"),
            "invest": ("内部股票消息", "比特币带单", "外汇投资群", "theta理财"),
        },
    ),
)
"""Chat-length spam and scams, English and Chinese."""


def spam_lines(seed: int, per_family: int = 120) -> list[TemplateLine]:
    """Up to ``per_family`` distinct lines per family, in family order (the same seed, the same
    lines); the ``topic`` is ``scam``."""
    return lines_of(SPAM_FAMILIES, seed, per_family)
