"""Hard benign negatives: harmless chat that shares words or shapes with abuse and ads.

Every template and slot value below was written by hand for this module (no line comes from a
dataset, and none from the adversarial dev set, which is for measurement only). A family is one
topic: templates with ``{slot}`` fields and, per slot, the values that may fill it; sentences are
templates x slot values, drawn with a seeded generator, so the same seed gives the same lines
(:mod:`modelbuild.template_families`).

Topics, each in English and Chinese: ordinary senses of words that are also insults (animals,
surnames, place and brand names, food), idioms and hyperbole, endearments and teasing between
friends (in Chinese also kinship phrases), identity terms in neutral statements (laws, history,
demographics, culture), price lists and bills, game talk, users reporting abuse they received
(the insult quoted), and everyday notices that look like ads (share buttons, group notices, red
envelopes, check-in codes). The build labels them ``none`` (toxicity) and ``chat`` / ``question``
(intent).
"""

from __future__ import annotations

from modelbuild.template_families import Family, TemplateLine, lines_of

__all__ = ["FAMILIES", "hard_negatives"]


_EN_ANIMALS = (
    "pig",
    "dog",
    "cow",
    "rat",
    "snake",
    "donkey",
    "ass",
    "bitch",
    "cock",
    "weasel",
    "toad",
    "goat",
    "hen",
    "mule",
    "vulture",
    "worm",
    "monkey",
    "ape",
    "hog",
    "sow",
    "parrot",
    "slug",
)
_EN_FAMILIES: tuple[Family, ...] = (
    Family(
        "en",
        "animal",
        (
            "the {animal} at the petting zoo {act}",
            "we saw a {animal} near the {place} this morning",
            "my uncle keeps a {animal} on his farm and it {act}",
            "is it true a {animal} can live for twenty years?",
            "drew a {animal} for my kid's school project",
            "the vet said our {animal} needs a check-up next week",
            "fun fact: a female dog is called a bitch and a male chicken a cock",
            "the {animal} exhibit closes at five, hurry",
        ),
        {
            "animal": _EN_ANIMALS,
            "act": (
                "ate my sandwich",
                "followed us everywhere",
                "was asleep all day",
                "made the kids laugh",
                "is getting old",
                "loves carrots",
            ),
            "place": ("river", "barn", "bus stop", "lake", "old mill", "school gate"),
        },
    ),
    Family(
        "en",
        "name",
        (
            "{person} is the new manager at the {shop}",
            "did you read the interview with {person}?",
            "we are driving through {town} on the way to the coast",
            "my cousin grew up in {town}, lovely place",
            "the train to {town} is delayed again",
            "{brand} has a new flavour out, tried it yet?",
            "ordered {dish} for dessert, it was great",
            "{person} scored twice in the second half",
        ),
        {
            "person": (
                "Dick Turner",
                "Mr Cox",
                "Ms Hancock",
                "Coach Butts",
                "Dr Gay",
                "Mrs Dickens",
                "Professor Wang",
                "Tom Bumstead",
                "Ann Hooker",
                "Fanny Price",
            ),
            "shop": ("bakery", "bank", "library", "garage", "pharmacy"),
            "town": (
                "Scunthorpe",
                "Middlesex",
                "Penistone",
                "Cockermouth",
                "Twatt",
                "Dildo",
                "Clitheroe",
                "Essex",
                "Wetwang",
                "Shitterton",
                "Fugging",
                "Lickey End",
            ),
            "brand": ("the Kum and Go store", "Dickies", "Pork King", "the Pussycat cafe"),
            "dish": ("spotted dick", "faggots and peas", "a dirty chai", "sloppy joes"),
        },
    ),
    Family(
        "en",
        "idiom",
        (
            "break a leg at the {event} tonight!",
            "you absolutely killed it at the {event}",
            "that {thing} killed me, i'm dead",
            "i could murder a {food} right now",
            "this {thing} is sick, where did you get it?",
            "we're gonna crush the {event} tomorrow",
            "let's kill two birds with one stone and do both on {day}",
            "stop beating a dead horse, the {event} is over",
            "shoot me a message before the {event}",
            "this new {thing} slaps so hard",
            "you're killing me with these {thing}s lol",
            "that {thing} was the bomb",
        ),
        {
            "event": (
                "recital",
                "audition",
                "job interview",
                "exam",
                "match",
                "show",
                "presentation",
                "gig",
                "final",
            ),
            "thing": ("joke", "song", "video", "meme", "jacket", "trick", "pun", "clip"),
            "food": ("burger", "pizza", "curry", "kebab", "plate of chips", "coffee"),
            "day": ("monday", "friday", "saturday", "the weekend"),
        },
    ),
    Family(
        "en",
        "endearment",
        (
            "{greet} {pet_name} {heart}",
            "love you {pet_name}, {greet}",
            "miss you already, {pet_name}",
            "come here you {pet_name}, give me a hug",
            "{greet}, my little {pet_name}",
            "haha you {pet_name}, you forgot your keys again",
            "happy birthday you old {pet_name} {heart}",
        ),
        {
            "greet": (
                "sleep tight",
                "good morning",
                "sweet dreams",
                "see you soon",
                "good night",
                "nighty night",
                "morning",
            ),
            "pet_name": (
                "goofball",
                "silly goose",
                "monster",
                "rascal",
                "dork",
                "stinker",
                "weirdo",
                "cheeky monkey",
                "nerd",
                "troublemaker",
                "piglet",
                "munchkin",
                "grumpy bear",
            ),
            "heart": ("❤️", "xx", "<3", "😘", ""),
        },
    ),
    Family(
        "en",
        "identity",
        (
            "{group} make up about {n}% of the population in {region}",
            "{region} legalised same-sex marriage in {year}",
            "the museum opened an exhibit on the history of {group} in {region}",
            "our book club is reading a memoir by one of the {group} writers of the {decade}",
            "{group} have lived in {region} since at least the {decade}",
            "the census counted more {group} in {region} than ten years ago",
            "a new law in {region} protects {group} from housing discrimination",
            "the festival celebrates the food and music of {group}",
            "my professor researches the history of {group} in {region}",
        ),
        {
            "group": (
                "immigrants",
                "muslims",
                "jews",
                "black americans",
                "gay and lesbian people",
                "transgender people",
                "mexican americans",
                "refugees",
                "catholics",
                "hindus",
                "indigenous peoples",
                "deaf people",
                "asian americans",
                "arab americans",
                "women",
            ),
            "region": (
                "canada",
                "the city",
                "our state",
                "germany",
                "australia",
                "the region",
                "new zealand",
                "brazil",
                "the county",
            ),
            "n": ("3", "7", "12", "18", "24", "31"),
            "year": ("2001", "2005", "2013", "2015", "2017", "2019"),
            "decade": ("1890s", "1920s", "1950s", "1970s", "1990s"),
        },
    ),
    Family(
        "en",
        "prices",
        (
            "split the bill: {item} ${price}, {item2} ${price2}, so we each owe a bit",
            "grocery run: {item} ${price}, {item2} ${price2}",
            "how much was the {item}? i think ${price}",
            "receipt says {item} ${price} and {item2} ${price2}, right?",
            "the cafe raised the {item} to ${price}, ouch",
        ),
        {
            "item": ("coffee", "bagel", "milk", "bread", "pizza", "bus pass", "taxi", "eggs"),
            "item2": ("tip", "drinks", "cheese", "apples", "parking", "dessert"),
            "price": ("2.50", "3", "4.20", "7", "12", "18"),
            "price2": ("1.80", "5", "6.50", "9", "15"),
        },
    ),
    Family(
        "en",
        "game",
        (
            "{player} {kill} the {target} and we won the round",
            "i got {owned} by the {target} again",
            "push {lane} and {kill} their {target}",
            "gg, that {target} fight was insane",
            "who keeps camping the spawn? i died {n} times",
            "need one more {target} kill for the achievement",
            "nice headshot on the {target}!",
        ),
        {
            "player": ("our tank", "the sniper", "my duo", "the healer", "our jungler"),
            "kill": ("killed", "destroyed", "nuked", "wiped", "executed", "slaughtered"),
            "target": ("boss", "dragon", "carry", "support", "zombie horde", "raid boss"),
            "owned": ("destroyed", "one-shot", "wrecked", "absolutely murdered"),
            "lane": ("mid", "top", "bot", "the left flank"),
            "n": ("three", "five", "ten"),
        },
    ),
    Family(
        "en",
        "report",
        (
            "{someone} called me {insult} in {where}, please ban them",
            "mods, {someone} keeps messaging me '{insult}', can you look into it?",
            "reporting {someone} for calling people {insult} in {where}",
            "is it ok that {someone} said i'm {insult}? screenshot attached",
            "got called {insult} by a stranger in {where}, blocking them now",
            "why did {someone} call my friend {insult}? not cool, i reported it",
        ),
        {
            "someone": ("a user", "someone", "that guy", "player 42", "a random account"),
            "insult": (
                "an idiot",
                "a moron",
                "a loser",
                "a pig",
                "a bitch",
                "trash",
                "a slut",
                "a retard",
                "the n-word",
                "a slur",
            ),
            "where": ("voice chat", "the lobby", "dms", "the comments", "general chat"),
        },
    ),
    Family(
        "en",
        "notice",
        (
            "reminder: {event} starts at {time}, see you all there",
            "the group link is pinned above, tap share to invite {who}",
            "free {snack} in the break room, help yourselves",
            "scan the code at the door to check in for {event}",
            "{who} can sign up for {event} on the form in the channel",
            "heads up: the {place} is closed on {day} for cleaning",
            "anyone want to go halves on the {snack} order?",
        ),
        {
            "event": ("the meeting", "yoga class", "the bake sale", "movie night", "orientation"),
            "time": ("6pm", "noon", "9:30", "half past seven"),
            "who": ("your classmates", "your teammates", "new members", "parents"),
            "snack": ("pizza", "donuts", "fruit", "cake", "bubble tea"),
            "place": ("gym", "library", "pool", "office", "cafeteria"),
            "day": ("monday", "thursday", "sunday"),
        },
    ),
)

_ZH_FAMILIES: tuple[Family, ...] = (
    Family(
        "zh",
        "animal",
        (
            "我家的{animal}今天{act}",
            "动物园新来了一只{animal}，孩子们都很喜欢",
            "晚饭吃{dish}，你要不要一起",
            "{animal}年出生的人今年多大了？",
            "奶奶在农村养了几只{animal}",
            "这只{animal}好可爱，{act}",
        ),
        {
            "animal": ("狗", "猪", "鸡", "牛", "驴", "猴子", "乌龟", "狐狸", "鸭子", "羊"),
            "act": ("一直在睡觉", "把拖鞋咬坏了", "吃了好多", "跟着我们跑", "生病了"),
            "dish": ("宫保鸡丁", "红烧猪蹄", "烤鸭", "狗不理包子", "牛肉面", "鸡蛋饼"),
        },
    ),
    Family(
        "zh",
        "name",
        (
            "{surname}老师明天请假，{subject}课改到周五",
            "新来的{surname}经理人挺好的",
            "我们下周去{city}出差",
            "{city}的{food}真好吃",
            "{surname}先生的快递放在前台了",
            "听说{city}今年冬天特别冷",
        ),
        {
            "surname": ("苟", "朱", "贾", "史", "吴", "牛", "马", "熊", "毕", "范"),
            "subject": ("数学", "语文", "英语", "体育", "物理"),
            "city": ("鸡西", "日喀则", "日照", "无锡", "奶头山", "大理", "二连浩特", "屁股山"),
            "food": ("冷面", "烧烤", "米线", "酸奶", "牦牛肉干"),
        },
    ),
    Family(
        "zh",
        "kinship",
        (
            "{kin}让我周末回家吃饭",
            "{kin}今天生日，我们去给她买蛋糕",
            "你{kin}身体好点了吗？",
            "我{kin}做的{food}最好吃了",
            "替我向你{kin}问好",
            "他{kin}是医生，可以问问",
        ),
        {
            "kin": ("妈", "妈妈", "老妈", "奶奶", "姥姥", "干妈", "干爹", "老爸", "大姨", "舅妈"),
            "food": ("饺子", "红烧肉", "包子", "炸酱面", "汤圆"),
        },
    ),
    Family(
        "zh",
        "idiom",
        (
            "{idiom}，说的就是这种情况",
            "笑死我了，{thing}太好笑了",
            "今天{task}累死了",
            "这个{thing}简直绝了",
            "你{task}真是个天才",
            "老师讲了成语{idiom}的意思",
            "别{idiom}了，我们换个办法",
        ),
        {
            "idiom": ("杀鸡儆猴", "狗急跳墙", "鸡飞狗跳", "对牛弹琴", "狐假虎威", "猪八戒倒打一耙"),
            "thing": ("视频", "段子", "表情包", "电影", "相声"),
            "task": ("搬家", "加班", "爬山", "写作业", "跑步"),
        },
    ),
    Family(
        "zh",
        "endearment",
        (
            "{greet}，{pet_name}{heart}",
            "{pet_name}，{greet}",
            "你这个{pet_name}，又忘带钥匙了",
            "想你了，{pet_name}",
            "生日快乐我的{pet_name}{heart}",
        ),
        {
            "greet": ("晚安", "早安", "好梦", "早点睡", "明天见"),
            "pet_name": ("小傻瓜", "笨蛋", "猪猪", "臭宝", "小坏蛋", "小笨猪", "宝贝", "死鬼"),
            "heart": ("❤️", "～", "😘", ""),
        },
    ),
    Family(
        "zh",
        "identity",
        (
            "{group}约占{region}人口的百分之{n}",
            "{region}在{year}年通过了保障{group}权益的法律",
            "博物馆有一个关于{group}历史的展览",
            "我们这学期在学{group}的文化和传统",
            "{group}的传统节日有很多特色美食",
            "{region}有不少{group}聚居的社区",
        ),
        {
            "group": (
                "少数民族",
                "回族",
                "藏族",
                "维吾尔族",
                "穆斯林",
                "外来务工人员",
                "残疾人",
                "女性",
                "移民",
                "同性伴侣",
                "犹太人",
                "黑人",
            ),
            "region": ("这个城市", "我们省", "新西兰", "欧洲", "本地", "加拿大"),
            "n": ("三", "五", "十二", "二十"),
            "year": ("二零零一", "二零一三", "二零一九", "二零二零"),
        },
    ),
    Family(
        "zh",
        "prices",
        (
            "{item}{price}，{item2}{price2}，一共多少？",
            "今天买菜：{item}{price}，{item2}{price2}",
            "这个月{item}{price}，比上个月贵了",
            "{item}现在{price}，涨价了",
        ),
        {
            "item": ("苹果", "鸡蛋", "猪肉", "电费", "水费", "话费", "房租"),
            "item2": ("香蕉", "白菜", "牛奶", "燃气费", "网费"),
            "price": ("五块一斤", "三十块", "一百二", "八块五"),
            "price2": ("两块", "四十", "十二块", "六十五"),
        },
    ),
    Family(
        "zh",
        "game",
        (
            "这局我被{target}{owned}了",
            "快去{act}，别在泉水挂机",
            "刚才{player}拿了五杀，太猛了",
            "{target}血太厚了，打不动",
            "我又被{target}秒杀了，气死",
        ),
        {
            "target": ("对面打野", "boss", "大龙", "对面射手", "僵尸"),
            "owned": ("打爆", "单杀", "虐", "秒"),
            "act": ("推塔", "打龙", "抓中路", "偷野"),
            "player": ("我们射手", "辅助", "队长", "打野"),
        },
    ),
    Family(
        "zh",
        "report",
        (
            "有人在{where}骂我{insult}，管理员请处理一下",
            "刚才{someone}说我是{insult}，截图在这",
            "举报{someone}，他在{where}骂别人{insult}",
            "{someone}一直私信骂我{insult}，怎么拉黑？",
        ),
        {
            "where": ("群里", "直播间", "评论区", "私信", "游戏里"),
            "insult": ("傻逼", "废物", "白痴", "脑残", "贱人", "智障"),
            "someone": ("一个网友", "那个人", "楼上", "有个账号"),
        },
    ),
    Family(
        "zh",
        "notice",
        (
            "群公告：{event}{time}开始，请大家准时参加",
            "点右上角的{button}，就能把{thing}发给朋友",
            "{greet}，大家抢{thing}啦",
            "{event}请扫门口的二维码签到",
            "通知：{place}{time}停水，请提前准备",
            "谁要拼单买{goods}？满五十包邮",
            "{thing}已经发到群里了，记得领",
        ),
        {
            "event": ("家长会", "周会", "班级聚餐", "年会", "读书会"),
            "time": ("明天下午三点", "周六上午", "今晚七点", "下周一"),
            "button": ("分享按钮", "三个点", "转发"),
            "thing": ("红包", "活动链接", "照片", "课程表", "群二维码"),
            "greet": ("新年快乐", "中秋快乐", "周末愉快"),
            "place": ("三号楼", "小区", "宿舍楼", "办公室"),
            "goods": ("水果", "纸巾", "大米", "奶茶"),
        },
    ),
)

FAMILIES: tuple[Family, ...] = _EN_FAMILIES + _ZH_FAMILIES
"""Every family, English first."""


def hard_negatives(seed: int, per_family: int = 60, lang: str | None = None) -> list[TemplateLine]:
    """Up to ``per_family`` distinct lines per family (``lang`` alone, or both), in family
    order; the same seed gives the same lines."""
    return lines_of([f for f in FAMILIES if lang is None or f.lang == lang], seed, per_family)
