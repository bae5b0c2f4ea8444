"""Traditional Chinese characters converted to Simplified (OpenCC ``t2s``), so one keyword list
written in Simplified characters also covers ``傻逼``'s Traditional spellings."""

from __future__ import annotations

from functools import cache

import opencc

from pipelines.canonical.scripts import has_han

__all__ = ["to_simplified"]


@cache
def _converter() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
    """``text`` with its Traditional characters replaced by their Simplified forms."""
    if not has_han(text):
        return text
    converted: str = _converter().convert(text)
    return converted
