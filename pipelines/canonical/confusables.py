"""Look-alike letters inside Latin words mapped to their Latin prototype.

The table is built once from the Unicode confusables data (TR39) shipped by
``confusable-homoglyphs``: every single non-ASCII letter that the data lists as confusable with
a single ASCII letter maps to that letter in lower case (Cyrillic small a U+0430 and Greek
alpha U+03B1 read ``a``, IPA alpha U+0251 reads ``a``, Cyrillic dze U+0455 reads ``s``).

A word (a run of letters) is folded only when it is written in Latin already, with look-alikes
mixed in (``fuck`` with a Greek upsilon), or when every letter of it is a look-alike and either
the rest of the message is Latin (``sexy`` spelled in Cyrillic dze, ie, ha and u) or the message
has no letter outside Latin and the look-alikes at all (a whole sentence typed in Cyrillic
look-alikes: ``selling drugs`` in dze, ie, i, komi de). Genuine Greek or Russian text
(``привет``, ``сука``, ``καλημέρα``) has letters no Latin letter looks like (п, и, к, λ, μ) and
keeps its letters.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from pipelines.canonical.scripts import is_latin_letter

__all__ = ["confusable_table", "fold_confusables"]

_WORD = re.compile(r"[^\W\d_]+")
# Characters that are never in the table: ASCII, CJK punctuation and ideographs, full-width forms.
_CANDIDATE = re.compile("[^\x00-\x7f\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


@cache
def confusable_table() -> dict[str, str]:
    """Non-ASCII letter -> the lower-case ASCII letter it is confusable with (TR39 data)."""
    source = resources.files("confusable_homoglyphs").joinpath("confusables.json")
    data: dict[str, list[dict[str, str]]] = json.loads(source.read_text(encoding="utf-8"))
    table: dict[str, str] = {}
    for char, entries in data.items():
        if len(char) != 1 or char.isascii() or not char.isalpha():
            continue
        for entry in entries:
            other = entry["c"]
            if len(other) == 1 and other.isascii() and other.isalpha():
                table[char] = other.lower()
                break
    return table


def _looks_latin(word: str, table: dict[str, str]) -> bool:
    """Whether every letter of ``word`` is Latin or a look-alike of a Latin letter."""
    return all(char in table or is_latin_letter(char) for char in word)


def _fold_word(word: str, table: dict[str, str]) -> str:
    return "".join(table.get(char, char) for char in word)


def fold_confusables(text: str) -> str:
    """``text`` with the look-alike letters of its Latin words replaced by Latin letters."""
    if text.isascii():
        return text
    table = confusable_table()
    if table.keys().isdisjoint(_CANDIDATE.findall(text)):
        return text
    words = _WORD.findall(text)
    latin_words = sum(1 for word in words if word.isascii())
    # Latin around the word, or no letter of a real non-Latin script anywhere in the message.
    latin_message = (latin_words > 0 and latin_words * 2 >= len(words)) or all(
        _looks_latin(word, table) for word in words
    )
    pieces: list[str] = []
    last = 0
    for match in _WORD.finditer(text):
        word = match.group()
        if word.isascii() or not any(char in table for char in word):
            continue
        has_latin = any(is_latin_letter(char) for char in word)
        if has_latin or (latin_message and _looks_latin(word, table)):
            pieces.append(text[last : match.start()])
            pieces.append(_fold_word(word, table))
            last = match.end()
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)
