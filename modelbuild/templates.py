"""Sentence templates for weak supervision, filled with words from packaged lexicons.

No package holds labelled chat abuse or chat advertising, so training examples for those classes
are generated: a template written here plus a word taken from a lexicon package (``naughty-words``,
``cleanse-speech``) or from the small lists below. Evaluation never grades on these sentences'
own words: the lexicon is split by seed and held-out words fill held-out sentences.
"""

from __future__ import annotations

__all__ = [
    "AD_PRODUCTS_EN",
    "AD_TEMPLATES_EN",
    "AD_TEMPLATES_ZH",
    "HATE_GROUPS_EN",
    "HATE_GROUPS_ZH",
    "HATE_TEMPLATES_EN",
    "HATE_TEMPLATES_ZH",
    "INSULT_TEMPLATES_EN",
    "INSULT_TEMPLATES_ZH",
    "NEUTRAL_FRAME_TEMPLATES_EN",
    "NEUTRAL_FRAME_TEMPLATES_ZH",
]

INSULT_TEMPLATES_EN: tuple[str, ...] = (
    "you are a {w}",
    "shut up you {w}",
    "what a {w}",
    "you {w}, get lost",
    "{w}!!",
    "go away {w}",
    "this streamer is a total {w}",
    "nobody likes you, {w}",
    "lol you absolute {w}",
    "stop talking {w}",
    "ur such a {w}",
    "{w} {w} {w}",
    "you're such a {w}",
    "you {w}",
    "honestly you are a {w}",
)

INSULT_TEMPLATES_ZH: tuple[str, ...] = (
    "你就是个{w}",
    "{w}，滚",
    "闭嘴吧{w}",
    "主播是{w}",
    "你这个{w}",
    "{w}！！",
    "真是{w}",
    "楼上{w}",
    "滚开{w}",
    "{w}{w}",
    "你是{w}",
    "你是个{w}吧",
    "你真是个{w}",
    "{w}一个",
    "你个{w}",
)

HATE_GROUPS_EN: tuple[str, ...] = (
    "immigrants",
    "muslims",
    "jews",
    "black people",
    "gay people",
    "women",
    "asians",
    "mexicans",
    "refugees",
    "christians",
    "trans people",
    "arabs",
)

HATE_TEMPLATES_EN: tuple[str, ...] = (
    "all {g} are {w} and should be kicked out",
    "i hate {g}, they are all {w}",
    "{g} are vermin, get rid of them",
    "{g} should not be allowed to live here",
    "kill all {g}",
    "{g} are subhuman {w}",
    "we need to wipe out the {g}",
    "{g} are a disease on this country",
)

HATE_GROUPS_ZH: tuple[str, ...] = (
    "外地人",
    "黑人",
    "穆斯林",
    "同性恋",
    "女人",
    "日本人",
    "河南人",
    "犹太人",
)

HATE_TEMPLATES_ZH: tuple[str, ...] = (
    "{g}都是{w}，全部滚出去",
    "我恨所有{g}，都是{w}",
    "{g}就是害虫，应该清除掉",
    "{g}不配活着",
    "杀光{g}",
    "{g}都是低等{w}",
)

AD_PRODUCTS_EN: tuple[str, ...] = (
    "followers",
    "crypto signals",
    "cheap sneakers",
    "replica watches",
    "gold coins",
    "diet pills",
    "a free iPhone",
    "viewers for your stream",
    "skins and gems",
    "casino bonus",
    "forex tips",
    "cheap game keys",
)

AD_TEMPLATES_EN: tuple[str, ...] = (
    "buy {p} now at www.best-{n}.com, 50% off today only",
    "DM me for {p}, cheapest price guaranteed",
    "get {p} for free!!! click bit.ly/{n}x now",
    "visit shop{n}.net for {p}, limited offer",
    "want {p}? add me on telegram @deal{n}",
    "selling {p}, fast delivery, message me",
    "earn $500 a day from home, check {n}cash.biz",
    "promo code WIN{n} gives you {p} free",
)

AD_TEMPLATES_ZH: tuple[str, ...] = (
    "{w}请加微信{n}，价格优惠",
    "本店{w}，欢迎咨询QQ{n}",
    "{w}，点击链接www.{n}.cn了解详情",
    "专业{w}，有意者私聊",
    "{w}火热进行中，加群{n}领取福利",
    "诚招{w}，日赚五百，联系{n}",
)

# Counterfactuals: the insult templates' frames that are not rude by themselves, filled with
# ordinary words from normal chat, labelled "none", so a head learns that the word, not the short
# "you are a ..." shape, makes a line abusive.
NEUTRAL_FRAME_TEMPLATES_EN: tuple[str, ...] = (
    "you are a {w}",
    "what a {w}",
    "{w}!!",
    "this streamer is a total {w}",
    "ur such a {w}",
    "lol you absolute {w}",
    "{w}",
    "{w} {w} {w}",
    "you {w}",
    "you're such a {w}",
    "honestly you are a {w}",
)

NEUTRAL_FRAME_TEMPLATES_ZH: tuple[str, ...] = (
    "你就是个{w}",
    "主播是{w}",
    "{w}！！",
    "真是{w}",
    "你这个{w}",
    "{w}",
    "{w}{w}",
    "楼上{w}",
    "你是{w}",
    "你是个{w}吧",
    "你真是个{w}",
    "{w}一个",
    "你个{w}",
)
