"""Letters and characters split apart by separators, joined back into the word they spell.

Latin: a run of three or more *single* letters separated by spaces, dots, dashes, underscores,
slashes or emoji (``f u c k``, ``f.u.c.k``, ``f-u-c-k``, ``f🤬u🤬c🤬k``) becomes one word
(``fuck``); when only spaces separate them it takes four letters (``u r a`` stays). Pieces
longer than one letter are real words and stay apart, so ``see you at 5``
is untouched.

Chinese: separators between two Han characters are removed (``傻 逼``, ``傻*逼`` and ``傻.逼``
read ``傻逼``); Chinese does not put spaces between words, so nothing is lost. Commas, colons
and sentence punctuation are kept: they separate clauses. One separator is a word: a plus sign
(or the heavy plus emoji) before a contact handle (``+薇``, ``+v``) is how contact spam writes
加 ("add"), so it is read as 加 rather than dropped (``有意者+薇`` reads ``有意者加薇``); ``1+1``,
``c++`` and a plus before other words are untouched.
"""

from __future__ import annotations

import re

from pipelines.canonical.scripts import HAN_CLASS, SEPARATOR_CLASS

__all__ = ["rejoin"]

_SINGLE = r"[a-z](?![^\W_])"
_SPLIT_LETTERS = re.compile(rf"(?<![^\W_]){_SINGLE}(?:{SEPARATOR_CLASS}+{_SINGLE}){{2,}}")
_HAN_SEPARATOR = (
    "[\\s.\\-_~+/|*#^=\u00b7\u2022\u2027\u30fb\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]"
)
_SPLIT_HAN = re.compile(rf"(?<={HAN_CLASS}){_HAN_SEPARATOR}+(?={HAN_CLASS})")
_SEPARATORS = re.compile(f"{SEPARATOR_CLASS}+")
_PLUS_CONTACT = re.compile(
    r"(?<![0-9a-z+])[+\u2795]\ufe0f?\s?(?=(?:vx|wx|v|qq|q|微信|微|薇|威|扣扣|扣|企鹅)(?:[^a-z]|$))"
)
_MIN_SPACED = 4
_NOT_SPACE = str.maketrans(dict.fromkeys("abcdefghijklmnopqrstuvwxyz", " "))


def _join(match: re.Match[str]) -> str:
    run = match.group()
    joined = _SEPARATORS.sub("", run)
    if len(joined) < _MIN_SPACED and not run.translate(_NOT_SPACE).strip():
        return run  # "u r a": three letters apart by spaces alone are ordinary texting
    return joined


def rejoin(text: str) -> str:
    """``text`` with split-up Latin letter runs and Han characters joined back together."""
    text = _SPLIT_LETTERS.sub(_join, text)
    if not text.isascii():
        if "+" in text or "\u2795" in text:
            text = _PLUS_CONTACT.sub("加", text)
        text = _SPLIT_HAN.sub("", text)
    return text
