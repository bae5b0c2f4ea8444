"""Quoted mentions: abuse a message quotes in reported speech, not abuse it says.

"someone wrote 'i'll stab you' under my post, reported", "please stop saying 'retard', it
hurts people", "PSA: the 'double your bitcoin' dm is a scam", "他私信我说“去死吧”, 已经举报了":
the abusive words are in quotes and the message around them reports, condemns or warns about
them. :func:`mentioned_spans` finds those quoted spans; the rule engine checks its rules again
with them blanked and keeps only the hits that remain (``pipelines.rules.engine``). The model
still sees the whole text.

The frames and named spans are data, ``pipelines/phrases/mentions.toml``, each pattern with
its examples (``pipelines.rules.phrase_patterns``); this module keeps the mechanism. A span
counts only inside a *mention frame*, searched in the canonical text:

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
from pipelines.rules.phrase_patterns import joined_alternatives, phrase_file
from pipelines.rules.reports import is_report

__all__ = ["MAX_SPAN_CHARS", "blank_spans", "is_mention_frame", "mentioned_spans"]

MAX_SPAN_CHARS = 200
_PHRASES = phrase_file("mentions.toml")
_FRAME = compile_re2(joined_alternatives(_PHRASES.patterns("en_frames", "zh_frames")), large=True)
_NAMED = compile_re2("|".join(_PHRASES.patterns("named")), large=True)
"""The named spans, one alternation: the first alternative matching at a position wins, and
its one capture group is the span."""
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
