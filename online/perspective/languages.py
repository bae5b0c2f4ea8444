"""The languages of a comment: the ones the caller names, or the ones its letters are written in.

Perspective takes ``languages`` (ISO 639-1 codes, ``en``, ``zh``, ``zh-Hans`` ...) or detects
them. Here detection is by script, which is all modstream needs to tell the languages its model
was trained on (English and Chinese, see the model card) from the ones it was not: Han
characters are ``zh``, Latin letters ``en`` (any Latin-script language reads as English), and
the other scripts name their most common language, so that a Japanese, Korean or Russian comment
is refused by name rather than scored by a model that never learned it. A comment without
letters (digits, emoji) reads as ``en``.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

__all__ = ["detect_languages", "primary_language"]

_SCRIPTS: dict[str, str] = {
    "CJK": "zh",
    "LATIN": "en",
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "HANGUL": "ko",
    "CYRILLIC": "ru",
    "GREEK": "el",
    "ARABIC": "ar",
    "HEBREW": "he",
    "DEVANAGARI": "hi",
    "THAI": "th",
    "ARMENIAN": "hy",
    "GEORGIAN": "ka",
    "BENGALI": "bn",
    "TAMIL": "ta",
}
"""The first word of a letter's Unicode name -> the language its script stands for."""


def primary_language(code: str) -> str:
    """The primary subtag of a language tag, lowercased: ``zh-Hans`` -> ``zh``."""
    return code.strip().replace("_", "-").split("-", 1)[0].lower()


def _language_of(char: str) -> str | None:
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    script = name.split(" ", 1)[0]
    if script == "CJK" or name.startswith("IDEOGRAPHIC"):
        return "zh"
    return _SCRIPTS.get(script, "und")


def detect_languages(text: str) -> list[str]:
    """The languages of ``text``'s letters, most letters first (Japanese kana outrank the Han
    characters Japanese also uses); ``["en"]`` when it has no letters."""
    counts: Counter[str] = Counter()
    for char in text:
        language = _language_of(char)
        if language is not None:
            counts[language] += 1
    if not counts:
        return ["en"]
    if "ja" in counts and "zh" in counts:
        counts["ja"] += counts.pop("zh")
    return [language for language, _ in counts.most_common()]
