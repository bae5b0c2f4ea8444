"""Reported abuse: a message in which the writer reports what someone else said or sent them.

"someone called me a stupid bitch, how do I report them?", "有人私信骂我傻逼, 怎么举报": the
abusive word is quoted, not aimed at anyone in the chat. A rule with ``yields_to_reports = true``
(the everyday profanity and solicitation keywords in the default rule set) leaves such a message
to the model, which is trained on reports as benign (the report families of
``modelbuild/data/training/hard_negatives.toml``) and still sees the whole text: "举报你啊傻逼"
("report me then, idiot") names reporting but is itself an insult, and the model flags it.
Block rules, severe-harm rules and every rule without the key are never affected.

A report is recognised by its frame, searched in the canonical text (case-folded, Simplified
Chinese, see ``pipelines.canonical``):

- English: someone *called me* / *keeps calling me* / *i was called* / *said i'm* / *told me
  to* / *told me i should* / *sent me* / *keeps dming me*, or asking *how (do|can|should) i
  report*, *reported him/her/them/this user*, *blocked* them;
- Chinese: *骂我*, *说我是*, *叫我去*, *私信我*, *收到…(邀请|私信|消息|照片)*, *怎么举报*,
  *已经举报*, *已经拉黑*, *被人骂*, *被(同学)叫 / 说成*, *骂粉丝 / 观众 / 别人*, *骂人的话*.

Near misses that are not reports: "i'll report you, idiot" (a threat to report, no frame of
received abuse), "call me when you're home" (no frame: only *called*, *calls*, *calling me*
count).
"""

from __future__ import annotations

import re2

__all__ = ["is_report"]

_EN = (
    r"\b(?:called|calls|calling) me\b",
    r"\b(?:i was|i got|i get|i keep getting|i kept getting|being|been) called\b",
    r"\bsaid (?:that )?(?:i'?m|i am|i was)\b",
    r"\b(?:told|tells|telling|keeps telling) me to\b",
    r"\b(?:told|tells|telling|keeps telling|kept telling) me (?:that )?i (?:should|need to"
    r"|ought to|must|deserve to)\b",
    r"\b(?:sent|sends|sending|dm'?d|dm'?ing|dms|messaged|messaging|pm'?d|pm'?ing|texted|texting)"
    r" me\b",
    r"\bhow (?:do|can|should) i (?:report|block)\b",
    r"\b(?:reported|blocked) (?:him|her|them|this user|that user|the user|this account)\b",
)
_ZH = (
    r"骂我",
    r"说我是",
    r"叫我去",
    r"私信我",
    r"收到.{0,12}(?:邀请|私信|消息|照片|短信)",
    r"怎么举报",
    r"(?:已经|已)(?:举报|拉黑)",
    r"被人骂",
    r"被[^,.!?;]{0,4}(?:叫|说成|叫成|骂成)",
    r"骂(?:粉丝|观众|别人|人家|网友|路人|残疾|我的|我家|我朋友|我哥|我姐|我妈|我爸)",
    r"骂人的话",
)
_FRAME = re2.compile("|".join(f"(?:{p})" for p in _EN + _ZH))


def is_report(canonical_text: str) -> bool:
    """Whether ``canonical_text`` reports abuse its writer received (see the module docstring)."""
    return _FRAME.search(canonical_text) is not None
