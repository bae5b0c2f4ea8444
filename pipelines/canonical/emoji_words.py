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

The table is data, ``pipelines/phrases/emoji_han.toml``, with its provenance and examples (no
packaged data gives these readings: Unicode's Chinese annotations name 💀 "骷髅" and 🌿 "药草",
not the 死 and 草 chat means by them); this module keeps the mechanism.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

from pipelines.canonical.scripts import HAN_CLASS
from pipelines.data_files import DataFile, DataFileError, keyed_table, read_data_file

__all__ = ["EMOJI_HAN", "read_emoji_table", "read_emoji_words"]

_ENTRY_KEYS = frozenset({"emoji", "reads", "name"})


def read_emoji_table(data: DataFile) -> dict[str, str]:
    """Emoji -> character from a read ``emoji_han.toml``; :class:`DataFileError` if an entry is
    not one emoji reading as one Han character, or an emoji is listed twice."""
    entries = data.body.get("emoji")
    if not isinstance(entries, list) or not entries:
        raise DataFileError(data.name, "'emoji' must be a non-empty array of tables")
    found: dict[str, str] = {}
    for position, raw in enumerate(entries):
        entry = keyed_table(data.name, raw, f"emoji[{position}]", _ENTRY_KEYS)
        emoji, reads = entry.get("emoji"), entry.get("reads")
        if not isinstance(emoji, str) or not emoji or emoji.isascii():
            raise DataFileError(data.name, f"emoji[{position}].emoji must be an emoji")
        if not isinstance(reads, str) or not _ONE_HAN.fullmatch(reads):
            raise DataFileError(data.name, f"emoji[{position}].reads must be one Han character")
        if emoji in found:
            raise DataFileError(data.name, f"emoji[{position}] is listed twice")
        found[emoji] = reads
    return found


_ONE_HAN = re.compile(HAN_CLASS)
EMOJI_HAN: Mapping[str, str] = MappingProxyType(
    read_emoji_table(
        read_data_file(resources.files("pipelines").joinpath("phrases", "emoji_han.toml"))
    )
)
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
