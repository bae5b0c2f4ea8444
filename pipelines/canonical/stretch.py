"""Stretched letters read once: ``kiiiiill yourselfffff`` also reads ``kill yourself``.

Normalisation squeezes a run of three or more identical characters to two (``fuuuuck`` is
``fuuck``), which keeps words with a double letter (``good``, ``kill``) but leaves a stretched
single letter doubled. This reading squeezes such runs to one letter instead, in the text before
normalisation shortened them, for matching only: ``shiiiit`` reads ``shit``, ``sooooo`` ``so``.
A pair is left alone (``kill``, ``ass``), and the base text keeps its two-letter form, so a
stretched double letter still matches there (``asssss`` is ``ass`` in the base text). Digits are
data and never squeezed, and the ``www`` of a web address is not a stretch.
"""

from __future__ import annotations

import re

__all__ = ["unstretched"]

_STRETCHED = re.compile(r"([^\W\d_])\1{2,}")
_ANY_RUN = re.compile(r"(\w)\1\1")  # a cheaper first look: most messages have no run at all


def unstretched(text: str) -> str | None:
    """``text`` with every run of three or more identical letters written once, or ``None``
    when it has no such run."""
    probe = text.replace("www.", "") if "www." in text else text
    if _ANY_RUN.search(probe) is None or _STRETCHED.search(probe) is None:
        return None
    return _STRETCHED.sub(r"\1", text)
