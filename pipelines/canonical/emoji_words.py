"""Emoji that stand for a Chinese character, read as that character next to Chinese text.

Chinese chat writes a word with the emoji of the thing it names, often for a pun on its sound:
``你是🐷吧`` (猪, pig), ``你🐴没了`` (马 *ma*, read as 妈 "mother"), ``🌿`` (草 *cao*, read as the
swear word 操), ``笑💀`` (死, "dying of laughter" and "die"). Without this stage the next one
(``rejoin``) takes the emoji for a separator between Han characters and drops it, so the word
is lost to the rules and to the models alike.

An emoji of :data:`EMOJI_HAN` that touches a Han character on either side (a variation selector
after it is ignored) becomes its character; the pun is then left to the pinyin reading, which
hears ``马`` in ``你马没了`` as the keyword ``你妈没了``. Only pictures of a nameable thing are
listed, not the emoji people use as separators (``🔥``, ``💥``, ``⭐``, hearts, faces): ``傻🔥逼``
still reads ``傻逼``. Emoji in Latin text (``i love my 🐶``) are left alone.

The table is written here because no packaged data gives these readings: Unicode's Chinese
annotations name 💀 "骷髅" and 🌿 "药草", not the 死 and 草 chat means by them.
"""

from __future__ import annotations

import re

from pipelines.canonical.scripts import HAN_CLASS

__all__ = ["EMOJI_HAN", "read_emoji_words"]

EMOJI_HAN: dict[str, str] = {
    "\U0001f437": "猪",  # pig face
    "\U0001f416": "猪",  # pig
    "\U0001f43d": "猪",  # pig nose
    "\U0001f436": "狗",  # dog face
    "\U0001f415": "狗",  # dog
    "\U0001f434": "马",  # horse face
    "\U0001f40e": "马",  # horse
    "\U0001f414": "鸡",  # chicken
    "\U0001f413": "鸡",  # rooster
    "\U0001f42e": "牛",  # cow face
    "\U0001f402": "牛",  # ox
    "\U0001f404": "牛",  # cow
    "\U0001f40d": "蛇",  # snake
    "\U0001f412": "猴",  # monkey
    "\U0001f435": "猴",  # monkey face
    "\U0001f42d": "鼠",  # mouse face
    "\U0001f400": "鼠",  # rat
    "\U0001f422": "龟",  # turtle
    "\U0001f41b": "虫",  # bug
    "\U0001f986": "鸭",  # duck
    "\U0001f480": "死",  # skull
    "\u2620": "死",  # skull and crossbones
    "\U0001f52a": "刀",  # kitchen knife
    "\U0001f52b": "枪",  # pistol
    "\U0001f4a3": "炸",  # bomb
    "\U0001f33f": "草",  # herb
    "\U0001f4a9": "屎",  # pile of poo
    "\U0001f47b": "鬼",  # ghost
    "\U0001f4b0": "钱",  # money bag
}
"""Emoji -> the character it is written for."""

_EMOJI = "(?:" + "|".join(sorted(map(re.escape, EMOJI_HAN), key=len, reverse=True)) + ")"
_FIRST_CHARACTERS = frozenset(emoji[0] for emoji in EMOJI_HAN)
_NEXT_TO_HAN = re.compile(rf"(?<={HAN_CLASS})({_EMOJI})\ufe0f?|({_EMOJI})\ufe0f?(?={HAN_CLASS})")


def _character(match: re.Match[str]) -> str:
    return EMOJI_HAN[match.group(1) or match.group(2)]


def read_emoji_words(text: str) -> str:
    """``text`` with each listed emoji that touches Han text replaced by its character."""
    if text.isascii() or _FIRST_CHARACTERS.isdisjoint(text):
        return text  # the common case, checked without running the regex
    previous = None
    while previous != text:  # "🐷🐷你": the first emoji touches Han once the second is read
        previous = text
        text = _NEXT_TO_HAN.sub(_character, text)
    return text
