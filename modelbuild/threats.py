"""Threats and self-harm incitement, hand-written templates labelled toxicity ``offensive``.

The heads have no threat or self-harm class (the served outputs are fixed: sentiment, intent,
toxicity none / offensive / hate), and the lexicon-filled insult templates hold no threat, so a
line such as "i will find you and hurt you" scored as harmless. These families teach the toxicity
heads that threatening someone and urging them to harm themselves is abusive, so the policy's
offensive thresholds flag it. Every template and slot value was written by hand for this module
(none from the adversarial dev set); the game-talk hard negatives of
:mod:`modelbuild.hard_negatives` ("we killed the boss") are their benign counterpart.
"""

from __future__ import annotations

from modelbuild.template_families import Family, TemplateLine, lines_of

__all__ = ["THREAT_FAMILIES", "threat_lines"]

THREAT_FAMILIES: tuple[Family, ...] = (
    Family(
        "en",
        "threat",
        (
            "i will {harm} you {when}",
            "i know where you live, {when} you are {dead}",
            "watch your back, i'm going to {harm} {target}",
            "keep talking and i'll {harm} {target}",
            "someone should {harm} {target} already",
            "you're {dead} {when}, i promise",
            "i'm coming for {target} {when}",
            "say that again and i will {harm} you",
        ),
        {
            "harm": (
                "kill",
                "stab",
                "shoot",
                "beat up",
                "hurt",
                "strangle",
                "break the legs of",
                "burn the house of",
                "put a bullet in",
                "smash the face of",
            ),
            "when": ("tonight", "after school", "tomorrow", "when i find you", "soon", "today"),
            "dead": ("dead", "finished", "a dead man", "going to bleed"),
            "target": ("you", "your family", "your kids", "your mom", "that streamer", "him"),
        },
    ),
    Family(
        "en",
        "self_harm",
        (
            "go {end} yourself, {who}",
            "nobody would miss you if you {died}",
            "just {end} yourself already, {who}",
            "do everyone a favour and {method}",
            "why don't you {method}, {who}",
            "the world is better off if you {died}",
        ),
        {
            "end": ("kill", "hang", "off", "end"),
            "died": ("died", "were gone", "killed yourself", "disappeared for good"),
            "who": ("loser", "nobody likes you", "seriously", "please"),
            "method": (
                "jump off a bridge",
                "drink bleach",
                "slit your wrists",
                "stop breathing",
                "walk into traffic",
                "end it all",
            ),
        },
    ),
    Family(
        "zh",
        "threat",
        (
            "{when}我要{harm}你",
            "我知道你住哪，{when}你就{dead}",
            "小心点，{when}找人{harm}你",
            "再说一句我就{harm}{target}",
            "{when}让你{dead}",
            "{target}等着，{when}{harm}你们",
        ),
        {
            "harm": ("杀了", "弄死", "砍死", "打死", "捅死", "废了", "收拾"),
            "when": ("今晚", "放学后", "明天", "迟早", "出门的时候"),
            "dead": ("完了", "死定了", "横着出来", "活不过明天"),
            "target": ("你全家", "你孩子", "你妈", "你们一家"),
        },
    ),
    Family(
        "zh",
        "self_harm",
        (
            "你这种人怎么还不去{method}",
            "去{method}吧，{who}",
            "{who}，赶紧{method}",
            "你{died}了也没人会难过",
            "这种人就该{method}",
        ),
        {
            "method": ("死", "跳楼", "喝农药", "上吊", "割腕", "自杀"),
            "who": ("废物", "根本没人在乎你这种人", "求你了", "真的"),
            "died": ("死", "消失", "跳楼"),
        },
    ),
)
"""Threats and self-harm incitement, English and Chinese."""


def threat_lines(seed: int, per_family: int = 60) -> list[TemplateLine]:
    """Up to ``per_family`` distinct lines per family, in family order (the same seed, the same
    lines); the ``topic`` is ``threat`` or ``self_harm``."""
    return lines_of(THREAT_FAMILIES, seed, per_family)
