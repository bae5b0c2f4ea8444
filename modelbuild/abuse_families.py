"""Chat-length abuse, hand-written templates: insults, dehumanising and stereotyping hate, sexual
harassment and sextortion, in English and Chinese, labelled toxicity ``offensive`` or ``hate``.

The weakly labelled sources (lexicon-filled templates, HateSonar's labels on chat and tweets)
hold few short chat insults in Chinese, little hate that uses no slur ("<group> are vermin",
"<group> control the banks") and no sexual harassment, so such lines scored as harmless. These
families give the toxicity heads those shapes with many slot values each, so that a line is
caught for what it says rather than for one listed phrase. Every template and slot value was
written by hand for this module (none from the adversarial dev set, which is for measurement
only); the identity, idiom and report families of :mod:`modelbuild.hard_negatives` are their
benign counterparts (a group named in a neutral sentence, an insult quoted in a report).

``hate`` families attack people for who they are (a nationality, a religion, a region, a sex, a
sexuality, a disability); ``offensive`` families insult or harass one person.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelbuild.template_families import Family, TemplateLine, family_lines

__all__ = ["ABUSE_FAMILIES", "AbuseFamily", "abuse_lines"]


@dataclass(frozen=True, slots=True)
class AbuseFamily:
    """A template family and the toxicity label its lines get."""

    label: str
    family: Family


_EN_GROUPS = (
    "immigrants",
    "muslims",
    "jews",
    "black people",
    "mexicans",
    "gays",
    "women",
    "asians",
    "refugees",
    "arabs",
    "indians",
    "gypsies",
    "chinese people",
    "africans",
    "disabled people",
    "trans people",
)
_ZH_GROUPS = (
    "河南人",
    "农村人",
    "外地人",
    "东北人",
    "黑人",
    "穆斯林",
    "同性恋",
    "女人",
    "残疾人",
    "乡下人",
    "新疆人",
    "上海人",
    "日本人",
    "印度人",
)

ABUSE_FAMILIES: tuple[AbuseFamily, ...] = (
    AbuseFamily(
        "hate",
        Family(
            "en",
            "dehumanising",
            (
                "{group} are {vermin}",
                "{group} are nothing but {vermin}, {end}",
                "those {group} breed like {animal}",
                "{group} are not even human, they are {vermin}",
                "{group} should all be {fate}",
                "i can't stand {group}, filthy {vermin}",
                "get these {group} out of here, they are {vermin}",
                "every one of those {group} is {vermin}",
            ),
            {
                "group": _EN_GROUPS,
                "vermin": (
                    "rats",
                    "cockroaches",
                    "parasites",
                    "animals",
                    "vermin",
                    "savages",
                    "a disease",
                    "subhuman trash",
                    "apes",
                    "monkeys",
                    "locusts",
                    "filth",
                ),
                "animal": ("rats", "rabbits", "cockroaches", "flies"),
                "end": ("wipe them out", "send them all back", "nobody wants them", "period"),
                "fate": (
                    "deported",
                    "locked up",
                    "sterilised",
                    "gassed",
                    "kicked out",
                    "exterminated",
                ),
            },
        ),
    ),
    AbuseFamily(
        "hate",
        Family(
            "en",
            "stereotype",
            (
                "{group} {control} the {institution}, wake up",
                "{group} are all {trait}",
                "never trust {group}, they are all {trait}",
                "{group} are ruining this country",
                "{group} are genetically {inferior}",
                "{group} don't deserve {right}",
                "{hero} had the right idea about {group}",
            ),
            {
                "group": _EN_GROUPS,
                "control": ("run", "control", "secretly own", "are taking over"),
                "institution": ("banks", "media", "government", "schools", "courts"),
                "trait": (
                    "thieves",
                    "liars",
                    "criminals",
                    "terrorists",
                    "lazy",
                    "dirty",
                    "rapists",
                ),
                "inferior": ("inferior", "stupid", "less evolved", "born criminals"),
                "right": ("rights", "to vote", "to live here", "jobs"),
                "hero": ("hitler", "the klan", "the nazis"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "en",
            "insult",
            (
                "you {adj} {noun}",
                "shut up you {adj} {noun}",
                "nobody asked, {noun}",
                "what a {adj} {noun}, {tail}",
                "you're such a {noun}, {tail}",
                "look at this {adj} {noun} crying",
                "get lost, {adj} {noun}",
                "you play like a {adj} {noun}, {tail}",
                "imagine being this {adj}, {noun}",
            ),
            {
                "adj": (
                    "pathetic",
                    "worthless",
                    "ugly",
                    "fat",
                    "stupid",
                    "brainless",
                    "useless",
                    "disgusting",
                    "braindead",
                    "dumb",
                    "filthy",
                    "retarded",
                ),
                "noun": (
                    "clown",
                    "loser",
                    "idiot",
                    "moron",
                    "pig",
                    "piece of trash",
                    "waste of space",
                    "freak",
                    "creep",
                    "bitch",
                    "whore",
                    "cow",
                    "rat",
                ),
                "tail": ("uninstall", "go cry", "just leave", "honestly", "lmao", "kys"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "en",
            "sexual",
            (
                "send me {nudes}, {tail}",
                "{out} unless you show me your {body}",
                "{body} pics or {out}",
                "how much for a night with you, {tail}",
                "bet you're {sexadj} in bed, {tail}",
                "send {nudes} or i post your {secret} everywhere",
                "pay me or everyone sees your {secret}",
                "i want to {sex} you so bad",
                "are you {age}? send me a pic of your {body}",
            ),
            {
                "nudes": ("nudes", "naked pics", "a pic without clothes", "your nudes"),
                "body": ("tits", "boobs", "ass", "body", "legs in bed"),
                "out": ("get out", "you're blocked", "leave", "stop talking"),
                "tail": ("babe", "sweetie", "now", "hurry up", "don't be shy"),
                "sexadj": ("a freak", "easy", "good", "wild"),
                "secret": ("photos", "chats", "video", "private pics"),
                "sex": ("fuck", "bang", "screw", "rail"),
                "age": ("13", "14", "a schoolgirl", "still in middle school"),
            },
        ),
    ),
    AbuseFamily(
        "hate",
        Family(
            "zh",
            "dehumanising",
            (
                "{group}都是{vermin}",
                "{group}就是{vermin}，{end}",
                "{group}滚出{place}",
                "{group}没一个好东西",
                "{group}就是{trait}，一辈子没出息",
                "{group}根本不算人，{end}",
                "我最恶心{group}了，{vermin}",
                "{group}活着就是浪费粮食",
            ),
            {
                "group": _ZH_GROUPS,
                "vermin": (
                    "蝗虫",
                    "畜生",
                    "垃圾",
                    "寄生虫",
                    "猴子",
                    "低等人",
                    "人渣",
                    "害虫",
                    "蟑螂",
                    "废物",
                ),
                "end": ("都该死", "全部赶走", "统统滚蛋", "别让他们进来"),
                "place": ("我们城市", "中国", "我们小区", "这个群"),
                "trait": ("素质低", "骗子", "小偷", "懒", "脏", "没脑子"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "zh",
            "insult",
            (
                "你就是个{noun}",
                "闭嘴吧{noun}",
                "{adj}的{noun}，{tail}",
                "你是{animal}吗，{tail}",
                "{noun}一个，还敢{act}",
                "滚吧{noun}",
                "你这个{noun}，{tail}",
                "看你那{adj}样，{tail}",
                "{noun}，{act}都不会",
            ),
            {
                "noun": (
                    "废物",
                    "垃圾",
                    "智障",
                    "脑残",
                    "蠢货",
                    "白痴",
                    "贱人",
                    "狗东西",
                    "人渣",
                    "丑八怪",
                    "死胖子",
                    "屌丝",
                    "傻子",
                    "猪头",
                ),
                "adj": ("恶心", "丑", "蠢", "没用", "下贱", "窝囊"),
                "animal": ("猪", "狗", "驴"),
                "tail": ("赶紧滚", "丢人", "恶心死了", "别说话了", "笑死"),
                "act": ("说话", "打排位", "开直播", "出来丢人"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "zh",
            "sexual",
            (
                "{when}有空吗，出来{invite}",
                "发{pics}给我看看",
                "{body}多大，{tail}",
                "陪我睡一晚给你{money}",
                "不发{pics}我就把你的{secret}发出去",
                "给钱就把{secret}删了，不然发给你家人",
                "你几岁了，发张{pics}",
                "{when}来{place}，我们{sex}",
            ),
            {
                "invite": ("约一下", "约炮", "睡一觉", "开个房"),
                "when": ("今晚", "明天", "周末", "现在"),
                "place": ("开房", "我家", "酒店", "宾馆"),
                "pics": ("裸照", "私房照", "不穿衣服的照片", "胸照"),
                "body": ("胸", "罩杯", "屁股"),
                "tail": ("拍给我", "发过来", "别装了", "让我摸摸"),
                "money": ("五百", "一千", "两千块"),
                "secret": ("裸照", "视频", "聊天记录", "私密照片"),
                "sex": ("做爱", "上床", "啪啪"),
            },
        ),
    ),
)
"""Insults, hate and sexual harassment, English and Chinese."""


def abuse_lines(seed: int, per_family: int = 80) -> list[tuple[str, TemplateLine]]:
    """``(label, line)`` pairs: up to ``per_family`` distinct lines per family, in family order
    (the same seed, the same lines); the line's ``topic`` is its family's."""
    return [
        (item.label, TemplateLine(text, item.family.lang, item.family.topic))
        for item in ABUSE_FAMILIES
        for text in family_lines(item.family, seed, per_family)
    ]
