"""Masked keywords: ``f*ck`` and ``sh*t`` fitted against the single-word Latin keywords.

A mask fits a keyword of the same length whose letters agree wherever the mask shows one (see
``pipelines.canonical.leet``); masks with fewer than two visible letters never reach here. The
keywords are bucketed by length and first (or last) letter, so a mask is compared with a few
keywords only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from pipelines.canonical.leet import mask_fits

__all__ = ["MaskMatcher"]

_LATIN_WORD = re.compile(r"[a-z]+")


class MaskMatcher:
    """Finds the keyword rules that a ``*``-masked token may spell."""

    __slots__ = ("_by_first", "_by_last")

    def __init__(self, keywords: Mapping[str, Sequence[str]]) -> None:
        """``keywords``: canonical keyword -> ids of the rules listing it."""
        self._by_first: dict[tuple[int, str], list[tuple[str, tuple[str, ...]]]] = {}
        self._by_last: dict[tuple[int, str], list[tuple[str, tuple[str, ...]]]] = {}
        for keyword, rule_ids in keywords.items():
            if not _LATIN_WORD.fullmatch(keyword):
                continue
            entry = (keyword, tuple(rule_ids))
            self._by_first.setdefault((len(keyword), keyword[0]), []).append(entry)
            self._by_last.setdefault((len(keyword), keyword[-1]), []).append(entry)

    def match(self, masks: Iterable[str]) -> set[str]:
        """The ids of the rules with a keyword that one of ``masks`` fits."""
        found: set[str] = set()
        for mask in masks:
            if mask[0] != "*":
                bucket = self._by_first.get((len(mask), mask[0]), [])
            elif mask[-1] != "*":
                bucket = self._by_last.get((len(mask), mask[-1]), [])
            else:
                continue
            for keyword, rule_ids in bucket:
                if mask_fits(mask, keyword):
                    found.update(rule_ids)
        return found
