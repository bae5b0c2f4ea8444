"""Obfuscated links written back as links, for the link and spam rules.

Spammers defang links so that filters miss them; this stage undoes the common tricks on canonical
(lower-case) text:

* ``hxxp://``, ``hxxps://``, ``h**p://`` read ``http://`` and ``https://``;
* bracketed dots and colons, ``[.]``, ``(.)``, ``{.}``, ``[dot]``, ``(dot)``, ``[:]``, read
  ``.`` and ``:``;
* a spelled or spaced dot before a common top-level domain, ``scam dot com``, ``scam . com``,
  ``scam .com``, ``scam点com``, reads ``scam.com`` (only before a domain in ``TLDS``: ``polka dot
  dress`` stays; a sentence end, ``done. me too``, is not a dot with a space before it);
* ``ww dot`` / ``ww .`` (``www`` is squeezed to ``ww`` by normalisation) reads ``ww.``.
"""

from __future__ import annotations

import re

__all__ = ["TLDS", "deobfuscate_links"]

TLDS = (
    "com", "net", "org", "cn", "io", "me", "cc", "co", "ly", "top", "xyz", "vip", "info", "biz",
    "app", "link", "shop", "site", "online", "club", "gg", "ru", "tk",
)  # fmt: skip
"""The top-level domains that a bare domain in chat is recognised by."""

_TLD = "(?:" + "|".join(TLDS) + ")"
_SCHEME = re.compile(r"\bh(?:xx|\*\*|tt)p(s?)\s*(?:\[:\]|\(:\)|:)\s*/\s*/", re.ASCII)
_BRACKETED_DOT = re.compile(
    r"\s*(?:\[\s*(?:\.|dot)\s*\]|\(\s*(?:\.|dot)\s*\)|\{\s*(?:\.|dot)\s*\})\s*"
)
_BRACKETED_COLON = re.compile(r"\[:\]|\(:\)")
_SPELLED_DOT = re.compile(
    rf"(?<=[a-z0-9])(?:\s*(?:\bdot\b|点|。)\s*|\s+\.\s*)(?={_TLD}\b)", re.ASCII
)
_WWW = re.compile(r"\bww(?:\s+dot\s+|\s*\.\s+|\s+\.\s*)(?=[a-z0-9])", re.ASCII)
_HINTS = re.compile(r"hxx|h\*\*p|[\[({点。]|dot|\s\.")


def deobfuscate_links(text: str) -> str:
    """``text`` (canonical) with defanged links restored; unchanged when there are none."""
    if _HINTS.search(text) is None:
        return text
    text = _SCHEME.sub(r"http\1://", text)
    text = _BRACKETED_DOT.sub(".", text)
    text = _BRACKETED_COLON.sub(":", text)
    text = _WWW.sub("ww.", text)
    return _SPELLED_DOT.sub(".", text)
