"""Benign twins of the abuse families: the same group names, violent verbs and sexual words in
ordinary sentences, labelled toxicity ``none`` and intent ``chat`` / ``question``.

The hate families of :mod:`modelbuild.abuse_families` put each group name next to an insult; a
linear head then learns the group name itself as a hate cue and flags "immigrants make up 14 % of
the population". The threat families do the same for "kill" and "shoot", which game chat is full
of, and the sexual families for words a sex-education or health line needs. Here every group of
those families also appears in neutral statements (demographics, laws, culture, people met), the
verbs and words in game, sport, cooking, health and school contexts, and the belittling
family's "just leave" / "log off" in ordinary leave-taking ("logging off now, take care"), so
that what the head learns is the attack, not the word. Every template and slot value was
written by hand for this module (none from the adversarial dev set).
"""

from __future__ import annotations

from modelbuild.abuse_families import EN_GROUPS, ZH_GROUPS
from modelbuild.template_families import Family, TemplateLine, lines_of

__all__ = ["COUNTERFACTUAL_FAMILIES", "counterfactual_lines"]

COUNTERFACTUAL_FAMILIES: tuple[Family, ...] = (
    Family(
        "en",
        "group_neutral",
        (
            "{group} make up about {n} percent of the {place} population",
            "a new law protects {group} from discrimination at work",
            "the museum has an exhibition on the history of {group} in {place}",
            "my neighbours are {group} and they invited us for dinner",
            "the report looks at how many {group} go to university",
            "a documentary about {group} won an award this year",
            "volunteers are helping {group} who arrived {when}",
            "the conference had a panel of {group} talking about {topic}",
            "are there any good books about the history of {group}?",
            "the survey asked {group} about {topic}",
        ),
        {
            "group": EN_GROUPS,
            "n": ("2", "5", "12", "14", "20"),
            "place": ("US", "UK", "city's", "country's", "state's", "European"),
            "when": ("last month", "this week", "after the flood", "in the spring"),
            "topic": ("housing", "healthcare", "their careers", "education", "voting", "food"),
        },
    ),
    Family(
        "en",
        "game_violence",
        (
            "{verb} their {target} first, then push {lane}",
            "i {past} the {target} three times this round",
            "can you {verb} the {target} from the tower?",
            "we got {past} by their {target} again, gg",
            "{verb} anyone who comes through the {place}",
            "nice, you {past} the whole enemy team",
            "the {target} keeps {ing} us from the {place}",
            "that combo {past} me in one second lol",
        ),
        {
            "verb": ("kill", "shoot", "snipe", "destroy", "execute", "stab", "focus"),
            "past": ("killed", "shot", "sniped", "destroyed", "wiped", "one-shot"),
            "ing": ("killing", "shooting", "sniping", "camping"),
            "target": ("sniper", "healer", "tank", "boss", "jungler", "support", "zombies"),
            "lane": ("mid", "top", "bot", "B site", "the left flank"),
            "place": ("door", "bridge", "spawn", "corridor", "ridge"),
        },
    ),
    Family(
        "en",
        "health_and_school",
        (
            "{topic} should be taught in {school}",
            "our {school} teacher explained {topic} today",
            "the doctor answered my questions about {topic}",
            "is there a good video that explains {topic} for teens?",
            "the clinic offers free advice on {topic}",
        ),
        {
            "topic": (
                "sex education",
                "puberty",
                "contraception",
                "consent",
                "breast cancer screening",
                "sexual health",
                "the human body",
            ),
            "school": ("middle school", "high school", "biology class", "health class"),
        },
    ),
    Family(
        "en",
        "leave_taking",
        (
            "heading to {place}, brb",
            "see you {when}, {tail}",
            "gotta go, {tail}",
            "logging off now, {tail}",
            "{greeting} everyone, {tail}",
            "i'm out for {when}, {tail}",
            "leaving the stream now, {tail}",
        ),
        {
            "place": ("the gym", "dinner", "the store", "bed", "work", "class", "walk the dog"),
            "when": ("tomorrow", "next week", "tonight", "later", "the weekend", "a bit"),
            "tail": ("take care", "have fun", "be nice", "stay safe", "cya", "love you all"),
            "greeting": ("night", "bye", "good night", "later", "peace out"),
        },
    ),
    Family(
        "zh",
        "group_neutral",
        (
            "{group}大约占{place}人口的百分之{n}",
            "新的法律保护{group}的就业权利",
            "博物馆正在办一个关于{group}历史的展览",
            "我的邻居是{group}，昨天请我们吃饭了",
            "这份报告研究了{group}的{topic}",
            "一部讲{group}的纪录片今年获奖了",
            "志愿者在帮助刚到的{group}",
            "有没有介绍{group}文化的好书？",
        ),
        {
            "group": ZH_GROUPS,
            "n": ("五", "十", "十二", "二十"),
            "place": ("全国", "本市", "全省", "这个地区"),
            "topic": ("教育情况", "收入情况", "医疗保障", "饮食习惯", "就业情况"),
        },
    ),
    Family(
        "zh",
        "leave_taking",
        (
            "我先下了，{tail}",
            "去{place}了，一会儿回来",
            "{when}见，{tail}",
            "下播了，{tail}",
            "晚安各位，{tail}",
        ),
        {
            "tail": ("各位保重", "玩得开心", "注意安全", "拜拜", "爱你们"),
            "place": ("吃饭", "健身", "洗澡", "上课", "遛狗", "睡觉"),
            "when": ("明天", "下周", "晚上", "周末", "回头"),
        },
    ),
    Family(
        "zh",
        "game_violence",
        (
            "先{verb}对面{target}，再去{act}",
            "这把我{past}了{target}三次",
            "我又被对面{target}{past}了",
            "{target}交给我来{verb}",
            "快去{act}，别让{target}跑了",
        ),
        {
            "verb": ("杀", "秒", "单杀", "狙", "抓", "击杀"),
            "past": ("秒", "单杀", "狙死", "打爆", "击杀"),
            "target": ("射手", "打野", "辅助", "法师", "boss", "僵尸"),
            "act": ("推塔", "补刀", "打龙", "偷野", "团战"),
        },
    ),
    Family(
        "zh",
        "health_and_school",
        (
            "{topic}应该从{school}开始教",
            "今天{school}老师讲了{topic}",
            "医生耐心解答了关于{topic}的问题",
            "有没有适合青少年的{topic}科普视频？",
        ),
        {
            "topic": ("性教育", "青春期", "避孕知识", "生理卫生", "乳腺癌筛查", "身体保护"),
            "school": ("小学", "初中", "高中", "生物课", "健康课"),
        },
    ),
)
"""Benign twins, English and Chinese."""


def counterfactual_lines(seed: int, per_family: int = 80) -> list[TemplateLine]:
    """Up to ``per_family`` distinct lines per family, in family order (the same seed, the same
    lines); the ``topic`` is the family's."""
    return lines_of(COUNTERFACTUAL_FAMILIES, seed, per_family)
