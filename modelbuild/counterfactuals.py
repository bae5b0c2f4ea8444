"""Benign twins of the abuse families: the same group names, violent verbs and sexual words in
ordinary sentences, labelled toxicity ``none`` and intent ``chat`` / ``question``.

The hate families of :mod:`modelbuild.abuse_families` put each group name next to an insult; a
linear head then learns the group name itself as a hate cue and flags "immigrants make up 14 % of
the population". The threat families do the same for "kill" and "shoot", which game chat is full
of, and the sexual families for words a sex-education or health line needs. Here every group of
those families also appears in neutral statements (demographics, laws, culture, people met), the
verbs and words in game, sport, cooking, health and school contexts, and the belittling
family's "just leave" / "log off" in ordinary leave-taking ("logging off now, take care"), so
that what the head learns is the attack, not the word.

More families answer what the disguise augmentation and the insult templates teach by
accident. Abbreviations, digits and pinyin initials are what disguised abuse looks like, so
short everyday slang ("afk 5 min", "gg wp", "slay 💅", "666", "yyds", "xswl", "狗头保命") is
written out as benign. Self-deprecation ("i'm trash on this map", "我太菜了") keeps an insult
aimed at oneself benign; lines addressed to "you" and "your family" ("替我向你爸妈问好", "say hi
to your mom") balance the insult templates' "you are a …" / "你是…". Neutral mentions of Chinese
regions and their food ("东北锅包肉yyds") balance the regional hate templates; farm animals by
their names (cock, bitch in breeding), second-hand trades between users ("selling my bike,
$80, pickup only", "出自行车 九成新 可以小刀") and ordinary links shared in chat keep those from
reading as abuse or spam; Chinese idioms and everyday hyperbole with 死, 杀, 狗, 猪 or 虎
("杀鸡儆猴", "笑死我了") keep those characters from reading as threats. Every template and slot
value was written by hand for this module (none from the adversarial dev set); the slang,
region, animal and link families were written after a probe set of everyday lines showed those
false positives (so that probe is no longer a clean measure of them).
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
            "we need to {verb} their {target} before we push {lane}",
            "we should push {lane} and {verb} their {target}",
            "we need to rotate {lane}, {verb} whoever is {ing} there",
            "if we {verb} their {target} we win this round",
        ),
        {
            "verb": ("kill", "shoot", "snipe", "destroy", "execute", "stab", "focus"),
            "past": ("killed", "shot", "sniped", "destroyed", "wiped", "one-shot"),
            "ing": ("killing", "shooting", "sniping", "camping"),
            "target": ("sniper", "healer", "tank", "boss", "jungler", "support", "zombies"),
            "lane": ("mid", "top", "bot", "A", "B", "B site", "long", "the left flank"),
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
        "en",
        "direct_address",
        (
            "are you {doing} {when}?",
            "you {good}, thanks for {help}",
            "say hi to your {family} for me",
            "is your {family} coming to {event}?",
            "you should try the {food} here, you'd love it",
            "when are you and your {family} back from {place}?",
            "you're {good_adj}, seriously",
        ),
        {
            "doing": ("free", "online", "coming", "busy", "streaming", "playing"),
            "when": ("tonight", "tomorrow", "this weekend", "later", "after class"),
            "good": ("rock", "are the best", "saved me", "legend"),
            "help": ("the help", "the carry", "the tip", "waiting", "the gift"),
            "family": ("mom", "dad", "parents", "sister", "brother", "grandma", "family"),
            "event": ("the game", "dinner", "the wedding", "graduation", "the show"),
            "food": ("noodles", "tacos", "cake", "curry", "burgers"),
            "place": ("the trip", "vacation", "the beach", "london", "grandma's"),
            "good_adj": ("so kind", "really good at this", "hilarious", "a great teammate"),
        },
    ),
    Family(
        "en",
        "chat_slang",
        (
            "{slang}",
            "{slang} {slang2}",
            "{react}, {slang}",
            "{slang}, {away}",
            "{away} {n} min, {slang2}",
            "that {thing} was {praise} {slang2}",
            "{slang} that {thing} was {praise}",
            "ok {n} more games then {away}",
            "{away} {n} min",
            "{style} {emoji}",
        ),
        {
            "slang": (
                "lol",
                "lmao",
                "gg",
                "wp",
                "ngl",
                "tbh",
                "idk",
                "fr",
                "ikr",
                "omg",
                "bet",
                "ggwp",
                "nice",
                "ez clap",
                "W",
                "big W",
                "oof",
                "bruh",
                "rip",
                "yo",
            ),
            "slang2": ("lol", "fr fr", "no cap", "ngl", "haha", "xD", ":)", "tbh", "lmao", "<3"),
            "react": ("sheesh", "yooo", "lets gooo", "omg", "wow", "hype", "pog", "dang"),
            "away": ("afk", "brb", "gtg", "omw", "back in 5", "afk dinner", "brb coffee"),
            "thing": ("clutch", "play", "song", "stream", "match", "edit", "combo", "goal"),
            "praise": ("fire", "insane", "goated", "cracked", "so clean", "lowkey amazing"),
            "n": ("2", "5", "10", "15", "20"),
            "style": (
                "slay",
                "ate that",
                "periodt",
                "it's giving main character",
                "no cap",
                "iconic",
                "mother",
                "serving looks",
            ),
            "emoji": ("💅", "🔥", "✨", "💀", "😭", "🙌"),
        },
    ),
    Family(
        "en",
        "animal_and_link",
        (
            "the {bird} {did} at {time}, farm life is rough",
            "our {animal} had {n} {young} this spring",
            "the vet checked the {animal} and her {young}",
            "{intro}: https://www.{site}/{path}",
            "{intro} {site}/{path}",
        ),
        {
            "bird": ("cock", "rooster", "hen", "goose", "turkey"),
            "did": ("crowed", "woke everyone", "started squawking", "got out again"),
            "time": ("5am", "dawn", "six", "sunrise"),
            "animal": ("bitch", "sow", "mare", "ewe", "cow", "nanny goat"),
            "n": ("two", "three", "six", "eight"),
            "young": ("puppies", "piglets", "foals", "lambs", "calves", "kids"),
            "intro": (
                "here's the recipe",
                "video link",
                "the docs are here",
                "map of the venue",
                "found the patch notes",
                "tickets are on",
            ),
            "site": ("youtube.com", "github.com", "wikipedia.org", "bbc.co.uk", "reddit.com"),
            "path": ("watch?v=a1b2c3", "r/cooking", "wiki/Chess", "news/world", "docs/setup"),
        },
    ),
    Family(
        "en",
        "second_hand",
        (
            "selling my {item}, {cond}, ${price}, {where}",
            "looking to buy a used {item}, budget around ${price}",
            "is ${price} too much for a {cond} {item}?",
            "sold the {item} for ${price}, thanks everyone",
        ),
        {
            "item": ("bike", "monitor", "phone", "keyboard", "textbook", "console", "desk"),
            "cond": ("barely used", "like new", "a year old", "slightly scratched"),
            "price": ("40", "80", "120", "250"),
            "where": ("pickup only", "local pickup", "can meet downtown", "no shipping"),
        },
    ),
    Family(
        "en",
        "self_deprecation",
        (
            "i'm {bad} on this {where}, can someone carry me",
            "sorry team, i'm {bad} {today}",
            "i'm such a {noob} at this game lol",
            "ugh i {fail} again, i'm {bad}",
            "don't look at my stats, i'm {bad} {today}",
            "me trying to {act}: {fail} lol",
        ),
        {
            "bad": ("trash", "garbage", "so bad", "terrible", "washed", "hopeless", "useless"),
            "where": ("map", "champ", "character", "level", "server", "hero"),
            "today": ("today", "tonight", "this season", "right now", "at aiming"),
            "noob": ("noob", "potato", "bot", "beginner", "scrub"),
            "fail": ("died", "missed", "fell off the map", "whiffed", "threw the game"),
            "act": ("aim", "dodge", "parkour", "build", "snipe"),
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
        "direct_address",
        (
            "你{family}什么时候{come}",
            "替我向你{family}问好",
            "你{family}做的{food}真好吃",
            "你{when}有空吗，{plan}",
            "你是{good}，谢谢{help}",
            "你在哪个城市，{plan}",
            "你{family}身体还好吗",
            "你是{who}吗",
            "你是{how}的？{thanks}",
        ),
        {
            "family": ("爸妈", "妈妈", "爸爸", "家里人", "奶奶", "姐姐", "哥哥", "老婆"),
            "come": ("回老家", "回来", "到家", "来看你", "出发", "下班"),
            "food": ("红烧肉", "饺子", "蛋糕", "鱼", "家常菜"),
            "when": ("今晚", "明天", "周末", "下午", "等会儿"),
            "plan": ("一起吃饭吧", "开黑吗", "出去逛逛", "帮我看个东西", "我们视频一下"),
            "good": ("我见过最好的队友", "真的厉害", "大好人", "我的偶像", "学霸"),
            "help": ("你的帮忙", "带我上分", "你的礼物", "你等我", "你的建议"),
            "who": ("哪里人", "学生", "新来的", "老师", "本地人", "第一次来", "做设计的"),
            "how": ("怎么做到", "什么时候到", "怎么找到这家店", "哪年毕业"),
            "thanks": ("好厉害", "教教我", "我也想去", "好巧"),
        },
    ),
    Family(
        "zh",
        "region_and_link",
        (
            "{region}的{food}真好吃",
            "{region}{food}yyds",
            "我老家是{region}的，{tail}",
            "下个月去{region}玩，有推荐吗",
            "{intro}：https://www.{site}/{path}",
            "{intro} {site}/{path}",
        ),
        {
            "region": ("河南", "东北", "四川", "上海", "新疆", "广东", "湖南", "山东", "云南"),
            "food": (
                "烩面",
                "锅包肉",
                "火锅",
                "小笼包",
                "大盘鸡",
                "早茶",
                "米粉",
                "煎饼",
                "过桥米线",
            ),
            "tail": ("过年回去", "欢迎来玩", "那边冬天很冷", "家里人都很热情"),
            "intro": ("视频链接", "攻略在这", "文档地址", "菜谱看这个", "活动页面"),
            "site": ("bilibili.com", "zhihu.com", "douban.com", "weibo.com", "github.com"),
            "path": ("video/BV1ab411c7", "question/12345", "doc/abc", "p/98765"),
        },
    ),
    Family(
        "zh",
        "second_hand",
        (
            "出{item}，{cond}，{price}，{where}",
            "收一个{item}，预算{price}左右",
            "我的{item}{price}出了，{tail}",
            "这个{item}{price}贵不贵？{ask}",
        ),
        {
            "item": ("二手手机", "旧书", "显示器", "自行车", "电饭煲", "游戏机", "键盘"),
            "cond": ("九成新", "用了一年", "没怎么用", "有点划痕"),
            "price": ("一百块", "两百", "三百五", "八十块", "五百"),
            "where": ("同城自提", "可以小刀", "楼下交易", "不包邮"),
            "tail": ("谢谢大家", "感谢捧场", "下次再出"),
            "ask": ("能便宜点吗", "可以面交吗", "还在吗"),
        },
    ),
    Family(
        "zh",
        "chat_slang",
        (
            "{slang}",
            "{slang}{slang2}",
            "{react}，{slang}",
            "这{thing}{praise}",
            "{thing}{praise}，{slang2}",
            "{away}，{slang2}",
            "{slang}，{away}",
        ),
        {
            "slang": (
                "666",
                "yyds",
                "绝绝子",
                "笑死",
                "xswl",
                "awsl",
                "哈哈哈哈",
                "233333",
                "冲冲冲",
                "上分上分",
                "带带我",
                "破防了",
                "摆烂了",
                "躺平了",
                "稳了",
                "hhh",
            ),
            "slang2": (
                "哈哈哈",
                "笑死",
                "6666",
                "冲",
                "好耶",
                "dddd",
                "u1s1",
                "hhhh",
                "😂",
                "狗头保命🐶",
                "[狗头]",
                "手动狗头",
            ),
            "react": ("我去", "我天这么强", "太秀了", "牛", "绝了", "好家伙", "啊啊啊"),
            "thing": ("操作", "波", "歌", "视频", "剧", "剪辑", "团战", "走位"),
            "praise": ("太秀了", "牛", "yyds", "绝了", "真顶", "666", "爱了"),
            "away": ("挂机五分钟", "吃饭去了", "88", "先溜了", "马上回来", "开黑吗"),
        },
    ),
    Family(
        "zh",
        "self_deprecation",
        (
            "我太{bad}了，{ask}",
            "这把我{fail}了，{bad}是我",
            "不好意思，我今天有点{bad}",
            "我就是个{noob}，{ask}",
            "又{fail}了，我真是{noob}",
        ),
        {
            "bad": ("菜", "坑", "手残", "拉胯", "划水"),
            "ask": ("谁带带我", "求大佬带", "别骂我", "下把一定", "我去练练"),
            "fail": ("送了", "掉线", "空大", "被秒", "白给"),
            "noob": ("菜鸡", "手残党", "萌新", "菜狗", "小白"),
        },
    ),
    Family(
        "zh",
        "idioms",
        (
            "{idiom}，{tail}",
            "今天语文课学了成语{idiom}",
            "老话说得好，{idiom}",
            "这件事真是{idiom}",
            "{everyday}",
        ),
        {
            "idiom": (
                "杀鸡儆猴",
                "鸡犬不宁",
                "画蛇添足",
                "亡羊补牢",
                "守株待兔",
                "虎头蛇尾",
                "如虎添翼",
                "骑虎难下",
                "卧虎藏龙",
                "生龙活虎",
                "九死一生",
                "置之死地而后生",
                "鸡飞狗跳",
                "猪年大吉",
                "狗尾续貂",
                "死里逃生",
                "杀身成仁",
                "鸡毛蒜皮",
            ),
            "tail": ("说的就是这个道理", "大家加油", "你们怎么看", "真有意思", "记住了"),
            "everyday": (
                "笑死我了",
                "累死了今天",
                "热死了",
                "饿死了，点外卖",
                "好吃死了",
                "电影杀青了",
                "菜市场猪肉今天特价",
                "砍价砍到一半",
                "杀价太狠了吧",
                "我家狗又拆家了",
                "鸡腿饭真香",
                "吓死我了哈哈",
            ),
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
