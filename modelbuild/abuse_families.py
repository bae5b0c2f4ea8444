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

__all__ = [
    "ABUSE_FAMILIES",
    "EN_GROUPS",
    "INSULT_WORDS",
    "ZH_GROUPS",
    "AbuseFamily",
    "abuse_lines",
]


@dataclass(frozen=True, slots=True)
class AbuseFamily:
    """A template family and the toxicity label its lines get."""

    label: str
    family: Family


EN_GROUPS = (
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
ZH_GROUPS = (
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

_EN_INSULT_ADJECTIVES = (
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
    "degenerate",
)
_EN_INSULT_NOUNS = (
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
    "jerk",
    "imbecile",
    "scumbag",
    "coward",
    "dumbass",
)
_ZH_INSULT_NOUNS = (
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
    "弱智",
    "神经病",
    "贱货",
    "畜生",
    "蠢猪",
    "废柴",
)
INSULT_WORDS: dict[str, tuple[str, ...]] = {
    "en": _EN_INSULT_ADJECTIVES + _EN_INSULT_NOUNS,
    "zh": _ZH_INSULT_NOUNS,
}
"""Everyday insult words of the insult families, by language: besides filling these families,
they are kept out of the benign fillers of :func:`modelbuild.datasets.benign_words` (the
package lexicons hold sexual and slur vocabulary but not "idiot", "loser" or 蠢货)."""

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
                "group": EN_GROUPS,
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
                "group": EN_GROUPS,
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
                "adj": _EN_INSULT_ADJECTIVES,
                "noun": _EN_INSULT_NOUNS,
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
        "offensive",
        Family(
            "en",
            "belittling",
            (
                "nobody {likes} you, {tail}",
                "you are the {superlative} person in this {place}",
                "everyone in this {place} {hates} you",
                "why are you even {here}, {tail}",
                "your {thing} is {bad}, {stop}",
                "no one wants you in this {place}",
                "you have the brain of a {small}",
                "i feel sorry for your {kin}, having to deal with you",
            ),
            {
                "likes": ("likes", "wants", "cares about", "listens to", "needs"),
                "tail": ("just leave", "get a clue", "go away", "seriously", "face it"),
                "superlative": ("dumbest", "most annoying", "ugliest", "most useless", "weirdest"),
                "place": ("chat", "server", "team", "group", "stream", "lobby"),
                "hates": ("hates", "laughs at", "is sick of", "is tired of"),
                "here": ("here", "alive", "talking", "allowed to play"),
                "thing": ("voice", "face", "opinion", "existence", "whole life"),
                "bad": ("a joke", "embarrassing", "unbearable", "pathetic"),
                "stop": ("stop talking", "log off", "nobody asked", "shut it"),
                "small": ("goldfish", "potato", "toddler", "rock"),
                "kin": ("parents", "mom", "friends", "teammates"),
            },
        ),
    ),
    AbuseFamily(
        "hate",
        Family(
            "en",
            "sexist",
            (
                "{women} are too {adj} to {act}",
                "{women} belong {place}, not {here}",
                "{women} should {stay} and {shut}",
                "a {woman} has no business {doing}",
                "{women} only get ahead by sleeping with the boss",
            ),
            {
                "women": ("women", "girls", "females"),
                "woman": ("woman", "girl", "female"),
                "adj": ("emotional", "stupid", "weak", "dumb"),
                "act": ("vote", "lead", "play ranked", "drive", "be engineers"),
                "place": ("in the kitchen", "at home", "in the bedroom"),
                "here": ("in games", "at work", "in charge", "in this chat"),
                "stay": ("stay home", "make sandwiches", "know their place"),
                "shut": ("keep quiet", "shut up", "leave decisions to men"),
                "doing": ("playing this game", "being a boss", "having opinions", "in politics"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "en",
            "veiled_threat",
            (
                "{watch}, i know {info}",
                "be careful {when}, {ominous}",
                "it would be a shame if {bad_thing}",
                "i have your {info_noun} now, {ominous}",
                "keep it up and see what happens {when}",
                "{ominous}, {when}",
            ),
            {
                "watch": ("watch yourself", "better be careful", "sleep with one eye open"),
                "info": ("where you live", "your school", "where your kids play", "your address"),
                "when": ("after dark", "on your way home", "tonight", "when you least expect it"),
                "ominous": (
                    "accidents happen",
                    "you won't see it coming",
                    "people like you disappear",
                    "we will be waiting",
                ),
                "bad_thing": (
                    "your house caught fire",
                    "something happened to your family",
                    "your car had an accident",
                ),
                "info_noun": ("address", "phone number", "ip", "home address"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "zh",
            "belittling",
            (
                "没人{likes}你，{tail}",
                "你是这个{place}里最{adj}的人",
                "大家都{hates}你，{tail}",
                "你活着有什么用",
                "就你这{thing}，还好意思{act}",
                "长得{ugly}还{act}",
                "你的脑子是{small}做的吧",
            ),
            {
                "likes": ("喜欢", "在乎", "想理", "需要"),
                "tail": ("别再说话了", "赶紧走吧", "有点自知之明", "认清现实吧"),
                "place": ("群", "队", "直播间", "班", "服务器"),
                "adj": ("蠢", "没用", "讨厌", "丑", "烦"),
                "hates": ("讨厌", "烦", "看不起", "嫌弃"),
                "thing": ("长相", "水平", "智商", "声音"),
                "act": ("露脸", "开麦", "发自拍", "出来见人", "直播"),
                "ugly": ("这么丑", "这样", "那么寒碜"),
                "small": ("豆腐", "浆糊", "猪脑"),
            },
        ),
    ),
    AbuseFamily(
        "hate",
        Family(
            "zh",
            "sexist",
            (
                "{women}就该{stay}",
                "{women}{act}都不行，{tail}",
                "{women}就是{adj}，{tail}",
                "{women}别{act}了，{tail}",
            ),
            {
                "women": ("女人", "女的", "娘们", "女司机"),
                "stay": ("在家做饭", "生孩子", "闭嘴听男人的"),
                "act": ("玩游戏", "开车", "当领导", "搞技术", "发表意见"),
                "adj": ("头发长见识短", "情绪化", "靠不住", "没脑子"),
                "tail": ("菜得要死", "别丢人了", "回家带孩子吧", "天生的"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "zh",
            "veiled_threat",
            (
                "{when}{careful}",
                "我知道你{info}，{ominous}",
                "你等着，{ominous}",
                "信不信我{harm}",
                "有人{watch}你，{ominous}",
            ),
            {
                "when": ("晚上回家", "放学路上", "出门", "走夜路"),
                "careful": ("小心点", "注意安全", "最好别一个人"),
                "info": ("住哪", "在哪上班", "孩子在哪上学", "家地址"),
                "ominous": ("出了事别怪我", "迟早让你好看", "你跑不掉的", "有你好受的"),
                "harm": ("找人收拾你", "让你在这混不下去", "找人堵你", "叫人废了你"),
                "watch": ("盯着", "跟着", "记住"),
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
                "group": ZH_GROUPS,
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
                "noun": _ZH_INSULT_NOUNS,
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
    AbuseFamily(
        "offensive",
        Family(
            "en",
            "mockery",
            (
                "{compare} as a {object} and twice as {worse}",
                "{slur_group} like you shouldn't be allowed {where}",
                "everyone go {pile} {their} {inbox} until {they} {quits}",
                "imagine being this {bad} at {game}, {tail}",
                "oh wow, {sarcasm}, your {kin} must be so proud",
                "you look like a {thing} that {verb}",
                "who let this {creature} near a keyboard",
            ),
            {
                "compare": ("dumb", "thick", "dense", "slow", "clueless"),
                "object": ("bag of rocks", "brick", "plank", "sack of potatoes", "box of hair"),
                "worse": ("ugly", "annoying", "useless", "boring"),
                "slur_group": ("cripples", "freaks", "losers", "people"),
                "where": ("online", "in ranked", "to talk", "near a mic"),
                "pile": ("spam", "flood", "brigade", "report-bomb"),
                "their": ("her", "his", "their"),
                "inbox": ("DMs", "comments", "inbox", "stream chat"),
                "they": ("she", "he", "they"),
                "quits": ("quits", "cries", "deletes the account", "leaves for good"),
                "bad": ("bad", "terrible", "clueless", "pathetic"),
                "game": ("the game", "life", "talking", "everything"),
                "tail": (
                    "embarrassing",
                    "just uninstall",
                    "do everyone a favour and leave",
                    "yikes",
                ),
                "sarcasm": ("another brilliant take", "what a genius move", "so smart"),
                "kin": ("parents", "mom", "family", "teachers"),
                "thing": ("potato", "melted candle", "thumb", "wet sock"),
                "verb": ("learned to talk", "got a phone", "crawled out of a drain"),
                "creature": ("clown", "goblin", "troglodyte", "caveman"),
            },
        ),
    ),
    AbuseFamily(
        "offensive",
        Family(
            "zh",
            "mockery",
            (
                "哎呀{praise}哦，{fail}，真是{whose}的骄傲呢",
                "就你这{thing}，也配{act}？",
                "你是不是脑子{broken}，{tail}",
                "{disabled}就别出来{play}了，{drag}",
                "跪下叫{title}，不然{threat}",
                "建议回{school}重新学学吧，{tail}",
                "说话跟{cmp}一样，{tail}",
            ),
            {
                "praise": ("好厉害", "真棒", "好强", "太秀了"),
                "fail": ("连这都不会", "这都能输", "又送了", "这都打不过"),
                "whose": ("你们家", "你爸妈", "你们班", "你们村"),
                "thing": ("智商", "水平", "德行", "脑子", "长相"),
                "act": ("跟我说话", "发言", "当队长", "评论", "出来见人"),
                "broken": ("有病", "进水了", "被门夹了", "坏掉了", "有坑"),
                "tail": ("别出来丢人了", "赶紧去治治", "听不懂人话吗", "丢人现眼"),
                "disabled": ("残废", "瘸子", "瞎子", "聋子", "弱智"),
                "play": ("打排位", "开麦", "丢人现眼", "打游戏", "带节奏"),
                "drag": ("拖累全队", "看着就烦", "浪费大家时间", "真晦气"),
                "title": ("爸爸", "爷爷", "主人"),
                "threat": ("天天来骂你", "别想在这混", "见你一次骂一次"),
                "school": ("幼儿园", "小学", "娘胎"),
                "cmp": ("智障", "傻子", "复读机", "猴子"),
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
