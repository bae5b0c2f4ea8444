"""The text the heads are trained and evaluated on: the canonical text the worker sends.

The contract: the served ``moderation`` model receives ``pipelines.canonical.canonicalize(raw)
.text`` (NFKC, case folding, marks and look-alike letters, Traditional -> Simplified, split
letters re-joined, ...), never the raw message. So every training and evaluation text goes
through the same function here before it is embedded. ``canonicalize`` is idempotent
(``canonicalize(canonicalize(x).text).text == canonicalize(x).text``, checked by a unit test on
training-like lines), so a caller that canonicalises text that already is canonical changes
nothing.
"""

from __future__ import annotations

from functools import lru_cache

from modelbuild.datasets import Example, TaskData
from pipelines.canonical import canonicalize

__all__ = ["canonical_task", "canonical_text"]


@lru_cache(maxsize=200_000)
def canonical_text(text: str) -> str:
    """The canonical text the model scores for the raw ``text``."""
    return canonicalize(text).text


def canonical_task(data: TaskData) -> TaskData:
    """``data`` with every example's text canonicalised (labels, sources and splits kept; an
    example whose canonical text is empty is dropped)."""
    examples = tuple(
        Example(text, e.label, e.lang, e.source, e.test)
        for e in data.examples
        if (text := canonical_text(e.text))
    )
    return TaskData(data.task, data.labels, examples)
