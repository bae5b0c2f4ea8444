"""Which words moved the model's decision: leave-one-word-out on the canonical text.

For an escalated message the model decided, ``attribute`` scores the canonical text once more
with each word left out (one scorer call, all variants together) and reports up to ``top_k``
words whose removal lowered the *deciding* probability the most, with the drop. The deciding
probability is the model output the policy named first in the verdict's reasons
(``deciding_output``: the policy lists its model signals in the order hate, offensive-or-hate,
spam, advertisement, harms, then the escalation), e.g. ``toxicity.hate`` for
``toxicity.hate=0.912>=0.8`` or ``toxicity.offensive_or_hate`` for ``grey_zone:toxicity=0.61``.

Words are maximal runs of letters and digits of the canonical text (``str.isalnum``), except
that each CJK ideograph or kana is a word of its own: Chinese and Japanese are not written with
spaces, and one character left out is the finest cut that stays honest (a bigram would blame
two characters for what one may carry). Only the first ``max_words`` words (in text order) are
tried, so a long message costs at most that many variants; words past it are never blamed.

The spans are raw-text offsets (Python string indices, i.e. code points, ``end`` exclusive),
mapped back through the canonical text's ``OffsetMap`` (``pipelines.canonical.trace``), as
``RuleHit.spans`` are: ``well f.u.c.k y0u`` blames ``f.u.c.k``. Never the text.

Pure and synchronous: the caller owns the scorer (the worker batches the variants of a whole
batch into one inference call with ``variants`` and ``attribution_from``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.canonical.offsets import OffsetError, OffsetMap, Span
from pipelines.errors import PipelineError
from pipelines.scores import HARM_LABELS, ModelScores

__all__ = [
    "DEFAULT_MAX_WORDS",
    "DEFAULT_TOP_K",
    "OUTPUTS",
    "AttributedSpan",
    "AttributionError",
    "ModelAttribution",
    "Variants",
    "attribute",
    "attribution_from",
    "deciding_output",
    "model_attribution_from_json",
    "probability",
    "variants",
    "words",
]

DEFAULT_TOP_K = 3
DEFAULT_MAX_WORDS = 32
_DROP_DIGITS = 4
_PAIR = 2

Scorer = Callable[[Sequence[str]], Sequence[ModelScores]]


class AttributionError(PipelineError):
    """An output name that is not a model probability, or a stored attribution that is not
    offsets and drops."""


def _hate(s: ModelScores) -> float:
    return s.toxicity[2]


def _toxic(s: ModelScores) -> float:
    return min(1.0, max(0.0, 1.0 - s.toxicity[0]))


def _spam(s: ModelScores) -> float:
    return s.intent[2]


def _ad(s: ModelScores) -> float:
    return s.intent[3]


def _harm(label: str) -> Callable[[ModelScores], float]:
    def read(s: ModelScores) -> float:
        value = s.harm(label)
        return 0.0 if value is None else value

    return read


OUTPUTS: dict[str, Callable[[ModelScores], float]] = {
    "toxicity.hate": _hate,
    "toxicity.offensive_or_hate": _toxic,
    "intent.spam": _spam,
    "intent.advertisement": _ad,
    **{f"harms.{label}": _harm(label) for label in HARM_LABELS},
}
"""The probabilities the policy decides on, by the names its reasons use."""

_REASON_ALIASES = {"toxicity": "toxicity.offensive_or_hate"}  # grey_zone:toxicity=...
_REASON_PREFIXES = ("severe:", "grey_zone:")


def deciding_output(reasons: Sequence[str]) -> str | None:
    """The model output the first model reason names (``None``: no model reason, e.g. a
    verdict escalated by a rule alone)."""
    for reason in reasons:
        name = reason
        for prefix in _REASON_PREFIXES:
            name = name.removeprefix(prefix)
        name = name.split("=", 1)[0]
        name = _REASON_ALIASES.get(name, name)
        if name in OUTPUTS:
            return name
    return None


def probability(scores: ModelScores, output: str) -> float:
    """The probability ``output`` (an ``OUTPUTS`` name) of ``scores``."""
    try:
        read = OUTPUTS[output]
    except KeyError:
        raise AttributionError(f"{output!r} is not a model output the policy decides on") from None
    return read(scores)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= code <= 0xFAFF  # CJK compatibility ideographs
        or 0x20000 <= code <= 0x3FFFF  # CJK extensions B and later
    )


def words(text: str) -> list[Span]:
    """The words of ``text`` as ``[start, end)`` spans, in order (module docs)."""
    spans: list[Span] = []
    start: int | None = None
    for i, char in enumerate(text):
        if _is_cjk(char):
            if start is not None:
                spans.append((start, i))
                start = None
            spans.append((i, i + 1))
        elif char.isalnum():
            if start is None:
                start = i
        elif start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    return spans


@dataclass(frozen=True, slots=True)
class Variants:
    """One message's leave-one-word-out texts: ``texts[i]`` is the canonical text without the
    word ``spans[i]`` (canonical offsets). Holds text: never stored or logged."""

    spans: tuple[Span, ...]
    texts: tuple[str, ...]


def variants(canonical: str, max_words: int = DEFAULT_MAX_WORDS) -> Variants:
    """The texts to score: the first ``max_words`` words of ``canonical`` each left out."""
    if max_words < 0:
        raise ValueError("max_words must be >= 0")
    spans = tuple(words(canonical)[:max_words])
    return Variants(spans, tuple(canonical[:start] + canonical[end:] for start, end in spans))


@dataclass(frozen=True, slots=True)
class AttributedSpan:
    """A word that moved the decision: where it is in the raw text and how much leaving it out
    lowered the deciding probability (rounded to 4 decimals, so every form carries the same
    number)."""

    start: int
    end: int
    drop: float

    def as_dict(self) -> dict[str, object]:
        return {"span": [self.start, self.end], "drop": round(self.drop, _DROP_DIGITS)}


@dataclass(frozen=True, slots=True)
class ModelAttribution:
    """The words that moved the model's decision (``spans``: largest drop first) and the output
    they moved. Offsets and numbers only, never the text."""

    output: str
    spans: tuple[AttributedSpan, ...]

    def as_dict(self) -> dict[str, object]:
        """The stored and published form: ``{"output": ..., "spans": [{"span": [start, end],
        "drop": 0.41}, ...]}``."""
        return {"output": self.output, "spans": [span.as_dict() for span in self.spans]}


def attribution_from(
    found: Variants,
    offsets: OffsetMap,
    full: ModelScores,
    output: str,
    scored: Sequence[ModelScores],
    top_k: int = DEFAULT_TOP_K,
) -> ModelAttribution:
    """The attribution from the variants' scores (``scored[i]`` for ``found.texts[i]``): the
    ``top_k`` words whose removal lowered ``output`` the most, only those that lowered it.
    ``offsets`` is the canonical text's map to the raw text."""
    if len(scored) != len(found.texts):
        raise AttributionError(f"{len(found.texts)} variants but {len(scored)} scores")
    base = probability(full, output)
    drops = [
        (base - probability(row, output), span)
        for span, row in zip(found.spans, scored, strict=True)
    ]
    moved = sorted((d for d in drops if d[0] > 0.0), key=lambda d: (-d[0], d[1]))[:top_k]
    spans = []
    for drop, (start, end) in moved:
        if end > len(offsets):
            raise OffsetError("the offset map is not the canonical text's")
        raw_start, raw_end = offsets.raw_span(start, end)
        spans.append(AttributedSpan(raw_start, raw_end, round(drop, _DROP_DIGITS)))
    return ModelAttribution(output, tuple(spans))


def attribute(
    canonical: str,
    offsets: OffsetMap,
    full: ModelScores,
    output: str,
    scorer: Scorer,
    *,
    top_k: int = DEFAULT_TOP_K,
    max_words: int = DEFAULT_MAX_WORDS,
) -> ModelAttribution:
    """Leave-one-word-out for one message, with one ``scorer`` call (module docs). ``full`` is
    the model's scores of ``canonical``; ``output`` an ``OUTPUTS`` name (``deciding_output``)."""
    probability(full, output)  # an unknown output fails before the scorer is called
    if len(offsets) != len(canonical):
        raise OffsetError("the offset map is not the canonical text's")
    found = variants(canonical, max_words)
    scored = list(scorer(found.texts)) if found.texts else []
    return attribution_from(found, offsets, full, output, scored, top_k)


def model_attribution_from_json(value: object) -> ModelAttribution | None:
    """The stored or published form back (``None`` for verdicts without one)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("output"), str):
        raise AttributionError("a model attribution must be an object with an output name")
    items = value.get("spans")
    if not isinstance(items, list):
        raise AttributionError("a model attribution's spans must be a list")
    spans: list[AttributedSpan] = []
    for item in items:
        bounds = item.get("span") if isinstance(item, dict) else None
        drop = item.get("drop") if isinstance(item, dict) else None
        if (
            not isinstance(bounds, list)
            or len(bounds) != _PAIR
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
            or not 0 <= bounds[0] < bounds[1]
            or not isinstance(drop, int | float)
            or isinstance(drop, bool)
        ):
            raise AttributionError("a model span must be {span: [start, end], drop: number}")
        spans.append(AttributedSpan(bounds[0], bounds[1], float(drop)))
    return ModelAttribution(value["output"], tuple(spans))
