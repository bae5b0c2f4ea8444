"""Quoted mentions: abuse a message quotes in reported speech, not abuse it says.

"someone wrote 'i'll stab you' under my post, reported", "please stop saying 'retard', it
hurts people", "PSA: the 'double your bitcoin' dm is a scam", "他私信我说“去死吧”, 已经举报了":
the abusive words are in quotes and the message around them reports, condemns or warns about
them. :func:`mentioned_spans` finds those quoted spans; the rule engine checks its rules again
with them blanked and keeps only the hits that remain (``pipelines.rules.engine``). The model
still sees the whole text.

A span counts only inside a *mention frame*, searched in the canonical text:

- a report of received abuse (:func:`pipelines.rules.reports.is_report`), or *report (it)*,
  *reported*, *blocked*, *muted*, *being / i was / got told*;
- a speech verb shortly before the quote: *said*, *told me/my sister*, *wrote*, *commented*,
  *posted*, *yelled*, *messaged*, *dmed me*, *keeps dming/commenting*, *sent me*, *my friend
  got*, *keeps saying*, *called me*; 说, 骂, 写, 留言, 私信, 发, 喊, 评论; others telling, calling
  or spamming (*people in chat were telling*);
- a condemnation: *stop saying*, *don't use*, *as an insult*, *it's (so) not ok*, *is it allowed
  to*, *still allowed*, *tired of*, *sick of*, *the amount of*, *stop with*, *that's (really)
  messed up / awful / cruel*; 别再说, 不要骂;
- what someone told another to do, quoted: *telling a new player to '…'*; a quoted phrase named
  as the messages it came in: *lots of '…' messages*, *flooded with '…' replies*;
- a warning: *psa*, *warning*, *heads up*, *reminder*, *is a scam*, *it's fake*, *don't click*,
  *did anyone else get*; 提醒, 警惕, 别上当, 千万别, 别信, 是骗子;
- a call on the moderators or the police (*get a mod*, *mods please*): a message that opens
  with *mods,* (a known way to
  dress abuse up as a report; the model still sees the whole text), *@mods*, *went to the
  police*, *screenshots*, *can admins do something / deal with / ban*;
- a moderator's note or a rule: *not allowed*, *against the rules/tos*, *we don't tolerate*,
  *mod note*, *counts as*, *under rule 4*, *timed out/banned/kicked someone*, *got (perma)
  banned*, *thanks mods*; 管理员, 踢了, 禁言;
  a call on the moderators or a condemnation: 能不能管管, 房管快处理, 群主, 地域黑, 太恶毒,
  算违法吗, 这种话, 乱说, 诈骗, 大家小心, 刻板印象, 求处理, and a message opening 管理, (or
  房管, 群管,);
- talk about filtering or naming abuse: *automod*, *the filter*, *is a slur*, *is literally
  racism*, *i'm not ok with*; 审核, 敏感词, 屏蔽词, 识别不出, 吧主; 这个词, 语言学;
- a message received: *got a (weird) dm/message/text/comment*; 有人私信(给)我, 那个人私聊我,
  被陌生人加微信;
- talk about a word: *the word/term/slur*, *what does … mean*, *swear word*, *just means*,
  *slang*, *in british english*, a quoted term defined (*'…' is the callout*, *'…' means*);
  这个缩写, 这个梗, 这个表情包;
  口头禅, 挂在嘴边; a message named and quoted (*the message '…'*); the moderators' word lists
  (*banned words*, *word list*);
- a warning not to follow it: 别点, 不要扫, 千万别加.

Quotes are ``"…"`` (full-width “…” reads as ``"`` once canonical), ``「…」``, ``『…』`` and
``'…'`` when the quote opens at the start of a word and closes at its end (so the apostrophes
of "i'll" and "don't" are not quotes). Two unquoted mentions count too: the message, link or ad
a warning names as a scam ("psa: the free nitro dm is a scam", "提醒: 兼职刷单的广告是骗子"; never
a group of people, "河南人都是骗子" is a smear), what a report says someone was called ("he
called me a retard in voice chat", "他骂我傻逼"), what someone said in a Chinese report
("有人在群里说河南人都是骗子, 能不能管管") and what a condemnation says
someone is told to do ("it's not ok to tell someone to go die"), what a condemnation tells people
to stop writing ("please stop posting kys as a joke") and what talk about the filter says it let
through ("the n word got filtered but spic didnt"), what others keep spamming ("so tired of
people spamming kys in chat"), the jokes a complaint asks people to drop ("stop with the ...
jokes"), what someone asks to add to the filter, what a report says someone calls another ("if
someone calls you a ..., report them"), the ad a Chinese report names ("这人一直发约炮广告"), what
someone keeps saying or spamming there ("一直在公屏说…", "用…刷屏", "他在每个帖子下面都刷…"), a
text message received and a scam's cover ("以…为名"), what someone else told the writer to do
("to the guy who told me to …: reported"; never "i told you to …") or what the writer was told
("being told to … every day is a lot"), what a comment or a post said ("saw a comment saying …,
reported it"), the word or message a report
names ("banned a user for the word …", "i reported the … message"), what the filter should
catch ("can automod catch … with spaces"), what is not on the word list yet ("why is … not on the
banned word list"), what someone sent the writer in a Chinese report ("有人私信给我发了一堆…")
the tactics a Chinese scam warning lists ("诈骗话术: 冒充客服、刷单返利"), what others told
someone else to do ("people in chat were telling the streamer to …"; never "i told the guy to …")
and the word that talk about a word names before 这个缩写 / 这个梗 ("nmsl这个缩写是哪来的").
Spans are at most 200 characters; overlapping spans are blanked as one. Without a frame a quote
is just a quote: "'kys' lol" is still incitement.
"""

from __future__ import annotations

import re2

from pipelines.rules.config import compile_re2
from pipelines.rules.reports import is_report

__all__ = ["MAX_SPAN_CHARS", "blank_spans", "is_mention_frame", "mentioned_spans"]

MAX_SPAN_CHARS = 200
_ZH_SENT_ME = (
    r"(?:有人|有个人|那个人|这个人|某人|对方|陌生人|有个号|一个号)(?:在[^,.!?;]{1,8})?"
    r"(?:私信|私聊|发消息|留言)(?:给)?我"
)
"""Someone else sent the writer a message, in a Chinese report ("有人私信给我", "那个人私聊我"):
a frame, and the start of the span of what they sent."""
_ZH_AT = r"(?:在[^,.!?;]{1,8}|在)?"
"""Where, or that it goes on, in a Chinese report: "有人在群里说…", "有人在刷…"."""
_TOLD = r"\b(?:i was|i got|i get|i keep getting|i kept getting|being|getting|got|been) told"
"""The writer told something, in the passive ("being told …", "i was told …"): a frame, and the
start of the span of what they were told."""
_EN_FRAMES = (
    # a speech verb up to 30 characters before an opening quote
    r"\b(?:said|says|say|saying|wrote|writes|writing|typed|types"
    r"|(?:told|tells|telling) (?:me|him|her|them|us|my \w+|our \w+|a friend|someone|people)"
    r"|commented|comments|posted|posts|replied|replies|responded|yelled|yells|screamed|shouted"
    r"|messaged|messages|messaging|texted|texting|spams|spammed|spamming|whispered|whispering"
    r"|commenting|dm'?e?d|dms|dm'?ing|pm'?e?d|pm'?ing|sent|sends"
    r"|(?:keeps?|kept) (?:saying|sending|typing|posting|spamming|writing|calling|dm'?ing"
    r"|messaging|commenting|replying)"
    r"|call(?:s|ed|ing)?(?: (?:me|him|her|them|us|people|someone|my \w+))?)\b[^'\"]{0,30}['\"]",
    r"\b(?:stop|quit|don'?t|do not|never|please stop|we don'?t) (?:saying|say|typing|type"
    r"|writing|write|using|use|calling people|calling|spamming|spam|posting|post)\b",
    r"\bas an? (?:insult|slur|joke|comeback)\b",
    r"\b(?:it'?s|it is|that'?s|that is)(?: so| really| just| totally| absolutely| still)? not"
    r" (?:ok|okay|cool|funny|a joke|banter|fine)\b",
    r"\b(?:i'?m|i am|we'?re|we are) not (?:ok|okay|cool|fine|comfortable) with\b",
    # talk about filtering and naming abuse: "why did automod not catch 'n1gger'? it's a slur",
    # "saying 'gypsies are thieves' is literally racism"
    r"\b(?:automod|auto mod|the filter|chat filter|word filter|filtered|censored|censor)\b",
    r"\b(?:is|are|it'?s|that'?s|was) (?:literally |obviously |clearly |straight up |just |pure )?"
    r"(?:a slur|slurs|racism|racist|sexist|homophobic|transphobic|hate speech|harassment"
    r"|bullying)\b",
    r"\bis it (?:ok|okay|allowed|normal|fine) (?:to|that|when|if)\b",
    r"\b(?:psa|warning|heads up|fyi|beware|careful|reminder)\b",
    # a call on the moderators or the police: "mods, this user keeps dming me '...'", "we went to
    # the police", "screenshots attached"
    r"^@?(?:mods?|moderators?|admins?)(?: pls| please| help)? ?[,:!]"
    r"|@(?:mods?|moderators?|admins?)\b"
    r"|\b(?:went|go|going|called|calling|contacted|told) (?:to )?the (?:police|cops)\b"
    r"|\bscreenshots?\b",
    r"\b(?:reports?|reported|reporting|blocked|muted|screenshotted)\b",
    # a complaint about what others say: "why is '...' still allowed here", "so tired of people
    # spamming ...", "the amount of '...' on eu servers", "please stop with the ... jokes"
    r"\b(?:allowed|tolerated|tired of|sick of|fed up with|the amount of|stop with)\b",
    r"\b(?:got|get|gets|was|were|been|being|keep getting) called\b",
    # told something, in the passive: "being told 'nobody likes you' in front of everyone hurt",
    # "i was told women belong in the kitchen during a ranked game"; and a call for a moderator
    rf"{_TOLD}\b|\bget (?:a|some) mods?\b|\bmods?,? (?:please|pls|plz)\b",
    # abuse named by its kind: "racist comments on my videos, stuff like '...'"
    r"\b(?:racist|sexist|homophobic|transphobic|hateful|abusive) (?:comments?|messages?|remarks?"
    r"|dms?|replies|abuse)\b",
    r"\b(?:is|it'?s|are|was) (?:a |an )?(?:scam|phishing)\b",
    r"\bdon'?t (?:click|open|log in|send|reply|fall for)\b",
    # a moderator's or a member's rule about it: "mod note: 'kys' jokes are not allowed",
    # "timed out someone for telling people to 'go die'", "is that against tos?"
    r"\b(?:not allowed|against (?:the )?(?:rules|tos|guidelines|terms)|we don'?t tolerate"
    r"|(?:is|are) never (?:ok|okay|fine|acceptable)|mod note|bannable|counts as"
    r"|(?:under|breaks|breaking|against|per|violates) rule (?:#|no\.? ?)?\d+)\b",
    r"\b(?:timed out|banned|kicked|warned|removed) (?:someone|somebody|a user|a guy|this guy"
    r"|a member|an account|him|her|them|people)\b",
    # someone got banned, and thanks for it: "the 'kys' guy got perma banned, thanks mods"
    r"\b(?:got|gets|getting|been|was|were|finally) (?:perma ?|permanently |temp ?|finally )?"
    r"(?:banned|permabanned|kicked|timed out|muted|suspended)\b"
    r"|\bthanks?(?: you)?,? (?:mods|moderators|admins)\b",
    # a message received: "got a message 'i know where you live' from a random"
    r"\b(?:got|received|get|gets|getting) (?:a |an |this |that |these |some )?(?:weird |creepy "
    r"|random |anonymous )?(?:message|dm|text|email|comment|reply|whisper|pm|voicemail)s?\b",
    # what someone received, quoted right after: "my friend got 'you should unalive yourself'"
    r"\b(?:i|we|he|she|they|someone|people|my \w+|our \w+) (?:got|gets|get|received|receives"
    r"|keeps? getting|kept getting)(?: a| the)?(?: message| dm| comment| reply| text)?"
    r"(?: saying)? ?['\"]",
    # talk about a word: "the word 'retard' is used in music", "what does 'simp' mean"
    r"\bthe (?:word|term|phrase|slur)s?\b|\bwhat does\b.{0,40}\bmean\b",
    # "is 'bastard' still considered a swear word?", "'retarded' in engineering just means delayed"
    r"\b(?:swear|curse|cuss) ?words?\b"
    r"|\b(?:just|technically|literally|originally|only|actually) (?:means?|meant)\b",
    # a message named and quoted: "if anyone sees the message 'i'm going to end it' please call her"
    r"\b(?:the|that|this|his|her|their) (?:message|dm|text|comment|post|msg|whisper|reply"
    r"|voicemail|note|status)s? (?:saying |that said |that says )?['\"]",
    # the moderators' word lists: "why isn't ... on the banned word list yet"
    r"\b(?:banned|blocked|filtered|forbidden|bad) (?:word|words|phrase|phrases|list)\b"
    r"|\bword ?list\b",
    # a condemnation after the fact: "they called my friend a ... and laughed, disgusting",
    # "saw someone telling a new player to '...', that's really messed up"
    r"\b(?:disgusting|unacceptable|not cool|so rude|vile|gross)\b"
    r"|\b(?:that'?s|it'?s|this is|that is|it is) (?:really |so |pretty |just |honestly )?"
    r"(?:messed up|fucked up|awful|horrible|terrible|cruel|sick|toxic|vile)\b",
    # what someone told another to do, quoted: "i saw someone telling a new player to '...'"
    r"\b(?:told|tells|telling|tell) (?:\w+ ){1,3}to ['\"]",
    # a quoted phrase named as the messages it came in: "lots of '...' messages from new accounts",
    # "my post got flooded with '...' replies", "the '...' email" (plural, or singular after
    # "the": "here's a '...' message for you" is no report)
    r"['\"] ?(?:messages|dms|comments|texts|replies|posts|spam|whispers|emails|calls|links)\b"
    r"|\bthe ['\"][^'\"]{1,80}['\"] ?(?:message|dm|comment|text|reply|post|email|sms|call|link)\b",
    # a quoted term defined: "in aviation '...' is the callout to pull the throttles back"
    r"['\"] (?:is|was) (?:the|a|an) (?:callout|call|command|term|word|name|abbreviation|acronym"
    r"|signal|code)\b|['\"] (?:means|meant|refers to|stands for|used to mean)\b",
    # a question whether others got it too: "did anyone else get the '...' email", and a warning
    # that it is fake
    r"\b(?:did|has|have) (?:anyone|anybody|someone|you guys|y'?all)(?: else)? (?:get|got|receive"
    r"|received|see|seen)\b|\b(?:it'?s|its|that'?s|thats) (?:fake|a fake|phishing)\b",
    # others telling, calling or spamming: "people in chat were telling the streamer to ..."
    r"\b(?:people|someone|somebody|they|users|chat|viewers|trolls|others|guys|kids)(?: in (?:the )?"
    r"\w+)? (?:were|was|are|kept|keep|keeps|started|been) (?:telling|calling|saying|spamming)\b",
    # a call on the moderators to act: "can admins do something about the person who keeps ..."
    r"\b(?:can|could|would|will|pls|please) (?:the )?(?:admins?|mods?|moderators?|someone"
    r"|somebody) (?:please |pls )?(?:do something|deal with|look (?:at|into)|help|ban|remove"
    r"|clean up|clear)\b",
    # talk about slang and dialect: "in british slang a '...' is a cigarette"
    r"\bslang\b|\bin (?:british|american|uk|us|aussie|australian|irish|scottish|indian) english\b",
)
_ZH_FRAMES = (
    r"(?:说|骂我|骂|写|留言|私信我|私信|发来|发给我|发了|发的|发|喊|叫我|评论|刷|弹幕)[^\"「『]{0,8}[\"「『]",
    r"(?:别|不要|请不要|不许|禁止)(?:再)?(?:说|骂|叫|发)",
    r"提醒|警惕|别上当|千万别|注意:|举报|拉黑|封号|截图|报警|别信|是骗子|骗子吧|管理员|踢了|禁言",
    # a warning not to follow a link or code: "别点", "不要扫"
    r"(?:别|不要|千万别|千万不要)(?:点|扫|加|回|转发)",
    # a message received from someone, in a report: "有人私信给我发了一堆…", "那个人私聊我说…",
    # "刚被陌生人加微信, 开口就是“…”"
    _ZH_SENT_ME,
    r"被[^,.!?;]{0,6}加(?:了)?(?:微信|好友|qq|vx)",
    # a call on the moderators, or a condemnation: "能不能管管", "房管快处理", "这种地域黑太恶心了"
    r"管管|管一管|管一下|处理一?下|房管|快处理|地域黑|太恶毒|太过分|恶心人|违法吗|算违法|封了他|封了她",
    # talk about the filter and a group's owner: "审核识别不出“nmsl”", "群主, 有人发了“…”"
    r"群主|版主|吧主|审核|屏蔽词|敏感词|违禁词|过滤|识别不出|清理一下",
    # talk about a word: "“傻逼”这个词在不同地方的冒犯程度差别好大"
    r"这个词|这个字|这两个字|这种词|这个缩写|这个梗|这个说法|这个表情包|语言学|词源|口头禅|挂在嘴边",
    # a condemnation or warning of what was said: "这种话能不能别乱说", "应该是诈骗, 大家小心"
    r"这种话|这种言论|乱说|诈骗|大家小心|注意安全|刻板印象|求处理",
    # a message that opens by calling on the moderators: "管理, 这个人在刷…"
    r"^(?:管理|房管|群管)[,:!]",
)
_FRAME = compile_re2("|".join(f"(?:{p})" for p in _EN_FRAMES + _ZH_FRAMES), large=True)
_NAMED = compile_re2(
    # what a warning names as a scam, a message, link or ad: "psa: the free nitro dm is a scam",
    # "兼职刷单的广告是骗子" (never a group of people: "河南人都是骗子" is a smear, not a warning)
    r"(?:^|[:,.!?;]) ?([^:,.!?;]{0,60}\b(?:dms?|links?|messages?|site|website|post|giveaway|offer"
    r"|bot|emails?|texts?|ads?|app|page|account) ?[^:,.!?;]{0,30}?) ?(?:is a scam|are scams"
    r"|is phishing|is a phishing \w+|is fake|are fake)"
    r"|(?:^|[:,.!?;]) ?([^:,.!?;]{0,40}(?:广告|链接|短信|消息|私信|网站|电话|客服|红包|兼职"
    r"|刷单|中奖|二维码)[^:,.!?;]{0,20}?)(?:是骗子|是诈骗|是假的|是钓鱼)"
    # what someone was called, in a report: "he called me a retard in voice chat", "他骂我傻逼"
    r"|\b(?:called|calls|calling|call) (?:me|him|her|them|us|my \w+|our \w+(?: \w+)?|people|someone"
    r"|everyone|each other|a user|this guy|a guy) "
    r"(?:a |an |the )?((?:[^\s,.!?;]+ ?){1,3})"
    r"|\b(?:got|get|gets|was|were|been|being|keep getting) called (?:a |an |the )?"
    r"((?:[^\s,.!?;]+ ?){1,3})"
    r"|\bsaid (?:that )?(?:i'?m|i am|i was) (?:a |an |the )?((?:[^\s,.!?;]+ ?){1,3})"
    r"|(?:骂|说)(?:我|他|她|别人|人|我们|楼主|楼上|主播|up主|大家|新人|我朋友|我同学)(?:是)?"
    r"(?:个|一个)?([^\s,.!?;]{1,6})"
    # what someone keeps saying or spamming, however the report names them: "一直在公屏说…",
    # "用nmsl刷屏", a text message received, a scam's cover: "以兼职刷单为名"
    r"|(?:一直|老是|天天|总是)(?:在[^,.!?;]{1,8})?(?:说|讲|刷|发|喊|骂)(?:我|你|他|她)?(?:是)?"
    r"([^,.!?;]{1,30})"
    r"|用([^,.!?;]{1,12})刷屏"
    r"|收到(?:了)?(?:一条|一个|条|个)?(?:短信|消息|私信|电话|邮件)(?:说|讲)([^.!?;]{1,40})"
    r"|以([^,.!?;]{1,12})为名"
    # what someone said, in a Chinese report: "有人在群里说河南人都是骗子, 能不能管管"
    r"|(?:有人|有个人|那个人|这个人|某人|楼上|好多人|有些人|一堆人|他|她|这人|那人"
    r"|(?:一个|有个|那个|这个)?(?:帖子|评论|弹幕|视频))"
    f"{_ZH_AT}(?:一直|老是|天天|总是|又|还|都|到处)?(?:说|讲|刷|发|喊|引流)(?:我|你)?"
    r"(?:是)?([^,.!?;]{1,30})"
    # what a report says someone told the writer (or another) to do: "他让我去跳楼, 我截图了",
    # "有人在评论区让楼主去自杀"
    f"|(?:有人|有个人|那个人|这个人|对方|某人|楼上|他|她|这人|那人){_ZH_AT}"
    r"(?:一直|老是|还|又)?(?:让|叫|劝)(?:我|楼主|别人|人家|他|她|大家|我朋友|主播)(?:去)?"
    r"([^,.!?;]{1,20})"
    # a clause of what was said, after the report names it: "他在群里地域黑, 说河南人都是小偷"
    r"|(?:^|[,;:])说([^,.!?;]{1,30})"
    # what a rule or a warning forbids: "禁止发黄图", "别点那个领红包的链接",
    # "看到兼职刷单的消息直接举报"
    r"|(?:禁止|不许|不准|严禁|请勿|不要再?|别再?)(?:发|说|骂|刷|讲)([^,.!?;、]{1,20})"
    r"|(?:别|不要|千万别|千万不要)(?:点|扫|加|回|转发)(?:那个|这个|这种|那种)?([^,.!?;]{1,20})"
    r"|看到([^,.!?;]{1,20}?)的(?:消息|广告|链接|私信|帖子|弹幕)"
    # the account a report names by what it posts: "那个刷加V领皮肤的号是机器人吧"
    r"|(?:那个|这个|有个|有些|那些|这些)(?:一直)?(?:刷|发)([^,.!?;]{1,20}?)的(?:号|人|账号|机器人|小号)"
    # the tactics a scam warning lists: "最近的诈骗话术: 冒充客服、刷单返利、虚假投资"
    r"|(?:诈骗|骗子|骗局)(?:的)?(?:话术|套路|手段|手法)(?:有)?:([^.!?;]{1,60})"
    # an example in talk about the filter: "有人用谐音绕过屏蔽词骂人, 比如把傻逼打成沙比"
    r"|比如(?:把)?([^,.!?;]{1,20})"
    # what someone else said or asked, in a report: "someone in the lobby said gays should die,
    # reported", "some creep asked me how much for a night, blocked"
    r"|\b(?:someone|somebody|a guy|this guy|some guy|a user|this user|he|she|they|people"
    r"|some \w+|the guy|the user|the person|that guy"
    r"|(?:a|one|this|that|the) (?:comment|reply|post|message|tweet|video|thread|review)"
    r"|comments|replies|posts)(?: \w+){0,4} (?:said|says|saying|wrote|posted|typed|yelled"
    r"|asked me|asks me|keeps asking me|kept asking me) (?:that |if |for |to )?"
    r"((?:[^,.!?;'\"]|\b'\b){1,80})"
    # what someone else told the writer to do, in a report: "to the guy who told me to go jump
    # off a bridge: reported" (never the writer's own words: "i told you to ..." is not one)
    r"|\b(?:who|someone|somebody|he|she|they|people|a \w+|some \w+|this \w+|that \w+|the \w+)"
    r"(?: \w+){0,3} (?:told|tells|keeps telling|kept telling|was telling) (?:me|us|my \w+|our \w+)"
    r" (?:to |that )?([^,.!?;:\"]{1,60})"
    # what the writer was told, in the passive: "being told to kys every single day is a lot"
    rf"|{_TOLD} (?:that |to )?([^,.!?;:\"]{{1,60}})"
    # what others told someone else to do: "people in chat were telling the streamer to ..."
    # (never the writer: "i told the guy to ..." is not one)
    r"|\b(?:people|someone|somebody|they|users|chat|viewers|trolls|others|he|she|guys|kids)"
    r"(?: \w+){0,3} (?:were |was |are |kept |keep |keeps )?(?:telling|told|tells) (?:the|a|this"
    r"|that|my|our|every|some) (?:\w+ ){1,2}to ([^,.!?;]{1,60})"
    # the word talk names before 这个词/这个缩写: "nmsl这个缩写最早是从哪里流行起来的"
    r"|(?:^|[\s,.!?;:])([^\s,.!?;:]{1,10}?)(?:这个|这种|这几个)(?:词|字|缩写|梗|说法)"
    # the word a report names: "banned a user for using the word ... in chat"
    r"|\bthe (?:word|term|slur|phrase|insult)s? ([^\s,.!?;'\"]+)"
    # the message a report names by its words: "i reported the ... message"
    r"|\bthe ((?:[^\s,.!?;'\"]+ ?){1,3}?) (?:message|messages|msg|msgs|dm|dms|comment|comments"
    r"|post|posts|whisper|whispers|spam|joke|jokes)\b"
    # what the filter should catch: "can we get automod to catch ... with spaces"
    r"|\b(?:automod|auto mod|filter|bot)\b[^.!?;]{0,20}\b(?:catch|catches|block|blocks|flag"
    r"|flags|detect|detects|filter out|pick up|picks up) ((?:[^\s,.!?;]+ ?){1,4}?)"
    r"(?: with| when| in| if| anymore| yet| too|[,.!?]|$)"
    # what is not on the word list yet: "why is ... not on the banned word list"
    r"|\b(?:is|isn'?t|are|aren'?t|was|wasn'?t) ((?:[^\s,.!?;]+ ?){1,3}?) (?:not |still not )?"
    r"(?:on|in) (?:the |our )?(?:banned |blocked |filtered |bad |forbidden )?(?:word |words )?"
    r"(?:list|filter|automod)\b"
    # what someone said they received in a Chinese report: "有人私信给我发了一堆…"
    f"|{_ZH_SENT_ME}(?:发了|发|说|问|讲)(?:一堆|一句|一条|好多)?([^,.!?;]{{1,30}})"
    # what someone is told to do in a condemnation: "it's not ok to tell someone to go die"
    r"|\b(?:tell|tells|telling|told|ask|asking|push|pushing|encourage|encouraging|urge|urging) "
    r"(?:someone|somebody|people|others|anyone|a person|them|him|her|kids) to ([^,.!?;]{1,60})"
    # what a Chinese report names as the ad someone posts: "这人一直发约炮广告", "严查这些博彩广告"
    r"|(?:发|刷|打|挂|贴|查|举报|这些|那些|这种|那种|各种)(?:了|的)?(?:一堆|很多|好多|一些|满屏)?"
    r"([^,.!?;\s]{1,12}?)的?小?(?:广告|暗语)"
    # what others keep spamming or saying, unquoted: "so tired of people spamming kys in chat",
    # "who keeps posting sub4sub everywhere"
    r"|\b(?:spamming|spams|spammed"
    r"|(?:keeps?|kept) (?:saying|typing|posting|using|writing|spamming))"
    r" ((?:[^\s,.!?;'\"]+ ?){1,3}?)(?: (?:in|on|at|everywhere|every|all|to|again)\b|[,.!?]|$)"
    # what a complaint asks people to drop or the filter to catch: "stop with the ... jokes",
    # "can we add kys to the automod list"
    r"|\bstop with (?:the|those|these|your|all the|all those) ((?:[^\s,.!?;]+ ?){1,3}?) ?"
    r"(?:jokes?|comments?|stuff|talk|memes?|posts?|slurs?|insults?|crap)\b"
    r"|\b(?:add|adding|added|put|putting) ((?:[^\s,.!?;]+ ?){1,3}?) (?:to|on|in) (?:the )?"
    r"(?:automod|auto mod|filter|word filter|blocked words|banned words|blacklist|blocklist)\b"
    # what someone calls another person, in advice or a report: "if someone calls you a ... just
    # report them"
    r"|\b(?:someone|somebody|anyone|people|they|he|she|a guy|this guy|a user) (?:calls?|called"
    r"|calling) you (?:a |an )?((?:[^\s,.!?;]+ ?){1,3})"
    # what a condemnation tells people to stop writing: "please stop posting kys as a joke"
    r"|\b(?:stop|quit|don'?t|do not|never|please stop) (?:saying|typing|writing|using|posting"
    r"|spamming) ((?:[^\s,.!?;]+ ?){1,3})"
    # what talk about the filter says it let through: "the n word got filtered but spic didnt"
    r"|\b(?:filtered|censored|blocked|flagged|caught)\b[^.!?;]{0,30}\bbut ((?:[^\s,.!?;]+ ?){1,3})"
    r"(?:didn'?t|doesn'?t|isn'?t|wasn'?t|did not|does not|is not|was not|got through"
    r"|gets through)\b",
    large=True,
)
_BRACKETED = re2.compile(
    f'"[^"]{{1,{MAX_SPAN_CHARS}}}"|「[^」]{{1,{MAX_SPAN_CHARS}}}」|『[^』]{{1,{MAX_SPAN_CHARS}}}』'
)
_OPENS_AFTER = frozenset(" \t(:[,;")
"""What may stand before an opening single quote (the canonical text has ASCII punctuation)."""


def is_mention_frame(canonical_text: str) -> bool:
    """Whether ``canonical_text`` reports, condemns or warns about what it quotes."""
    return is_report(canonical_text) or _FRAME.search(canonical_text) is not None


def _single_quoted(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        opens = (
            text[i] == "'"
            and (i == 0 or text[i - 1] in _OPENS_AFTER)
            and i + 1 < n
            and not text[i + 1].isspace()
        )
        if not opens:
            i += 1
            continue
        end = None
        for j in range(i + 1, min(n, i + MAX_SPAN_CHARS + 2)):
            if (
                text[j] == "'"
                and not text[j - 1].isspace()
                and (j + 1 == n or not text[j + 1].isalnum())
            ):
                end = j + 1
                break
        if end is None:
            i += 1
            continue
        spans.append((i, end))
        i = end
    return spans


def mentioned_spans(canonical_text: str) -> list[tuple[int, int]]:
    """The quoted spans of ``canonical_text`` (start, end), when it has a mention frame;
    otherwise none."""
    if not is_mention_frame(canonical_text):
        return []
    spans = [(m.start(), m.end()) for m in _BRACKETED.finditer(canonical_text)]
    for m in _NAMED.finditer(canonical_text):
        group = next(g for g in range(1, _NAMED.groups + 1) if m.start(g) >= 0)
        spans.append((m.start(group), m.end(group)))
    taken = [range(a, b) for a, b in spans]
    spans += [
        (a, b)
        for a, b in _single_quoted(canonical_text)
        if not any(a in r and b - 1 in r for r in taken)
    ]
    return sorted(spans)


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by one space; overlapping spans are blanked as one."""
    out: list[str] = []
    last = 0
    for start, end in sorted(spans):
        if start < last:  # overlaps the span just blanked: extend it
            last = max(last, end)
            continue
        out.append(text[last:start])
        out.append(" ")
        last = end
    out.append(text[last:])
    return "".join(out)
