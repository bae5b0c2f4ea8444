"""One canonical text for rules and models: ``canonicalize(text) -> CanonicalText``.

The raw message is what is stored; this is what is matched and scored. Stages, in order:

Base canonical text (``CanonicalText.text``, what the models score):

1. ``pipelines.normalize``: control and zero-width characters dropped, NFKC (full-width and
   styled mathematical letters become ASCII), case folding, typographic quotes, repeats squeezed,
   whitespace collapsed;
2. ``marks``: combining marks on Latin letters stripped (``fück``, Zalgo text);
3. ``confusables``: Greek, Cyrillic, IPA and other look-alike letters inside Latin words mapped
   to their Latin prototype (Unicode TR39 data); genuine Greek and Russian words are kept;
4. ``traditional``: Traditional Chinese to Simplified (OpenCC ``t2s``);
5. ``emoji_words``: emoji that stand for a Chinese character, next to Han text, read as it
   (``你是🐷吧`` -> ``你是猪吧``, ``笑💀`` -> ``笑死``); separator emoji (``🔥``) are not listed;
6. ``rejoin``: single letters split by spaces, dots, dashes or emoji joined (``f u c k``), Han
   characters split by spaces or symbols joined (``傻 逼``);
7. normalisation again (a joined run may need squeezing); steps 1-7 repeat until the text is
   stable, so ``canonicalize(canonicalize(x).text).text == canonicalize(x).text``.

Readings for matching only (never scored, never stored), computed from the base text:

8. ``links``: defanged links restored (``hxxp``, ``[.]``, ``dot com``) -> ``CanonicalText.links``;
9. ``leet``: tokens mixing letters with digits or symbols read as letters (``sh1t``) and
   ``*``-masked tokens (``f*ck``) -> ``CanonicalText.leet``, ``CanonicalText.masks``;
   ``stretch``: letters stretched past two read once (``kiiiill`` -> ``kill``, from the text
   before normalisation squeezed the run to two) -> also ``CanonicalText.leet``;
10. ``pinyin``: the fuzzy pinyin syllables of Han text (and of the one-syllable Latin words in
   it) -> ``CanonicalText.pinyin``, for homophones; keyword lists get their pinyin forms
   (syllables, spellings such as ``shabi``, initials such as ``nmsl``) with ``keyword_forms``.
   A Latin word typed in pinyin is its own reading: the spellings and initials of the keywords
   are matched against the base text as words.

Offsets (``trace``, for the messages whose rules matched): the same text and readings, each with
an ``OffsetMap`` back to the raw text, built by aligning every stage's input with its output
(``offsets``), so a match in any reading can be shown on the raw characters that produced it
(``f.u.c.k y0u``: the rule read ``fuck you``; the spans cover ``f.u.c.k`` and ``y0u``).

``canonical_form(text)`` is the base text alone, for keyword lists: a list and a message that
spell a word the same way agree.
"""

from pipelines.canonical.offsets import OffsetError, OffsetMap
from pipelines.canonical.pinyin import KeywordForms, PinyinReading, keyword_forms
from pipelines.canonical.text import CanonicalText, canonical_form, canonicalize
from pipelines.canonical.trace import TracedText, trace

__all__ = [
    "CanonicalText",
    "KeywordForms",
    "OffsetError",
    "OffsetMap",
    "PinyinReading",
    "TracedText",
    "canonical_form",
    "canonicalize",
    "keyword_forms",
    "trace",
]
