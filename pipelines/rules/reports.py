"""Reported abuse: a message in which the writer reports what someone else said or sent them.

"someone called me a stupid bitch, how do I report them?", "有人私信骂我傻逼, 怎么举报": the
abusive word is quoted, not aimed at anyone in the chat. A rule with ``yields_to_reports = true``
(the everyday profanity and solicitation keywords in the default rule set) leaves such a message
to the model, which is trained on reports as benign (the report families of
``modelbuild/data/training/hard_negatives.toml``) and still sees the whole text: "举报你啊傻逼"
("report me then, idiot") names reporting but is itself an insult, and the model flags it.
Block rules, severe-harm rules and every rule without the key are never affected.

A report is recognised by its frame, searched in the canonical text (case-folded, Simplified
Chinese, see ``pipelines.canonical``); the frames are data, ``pipelines/phrases/reports.toml``,
each with its examples:

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

from pipelines.rules.phrase_patterns import joined_alternatives, phrase_file

__all__ = ["is_report"]

_FRAME = re2.compile(
    joined_alternatives(phrase_file("reports.toml").patterns("report_en", "report_zh"))
)


def is_report(canonical_text: str) -> bool:
    """Whether ``canonical_text`` reports abuse its writer received (see the module docstring)."""
    return _FRAME.search(canonical_text) is not None
