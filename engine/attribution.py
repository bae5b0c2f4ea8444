"""The words that moved the model, for a batch's escalated verdicts: one extra inference call.

After a model batch is scored and decided, :func:`attribute_escalations` takes the verdicts that
the model decided and that escalate, builds every leave-one-word-out variant of their canonical
texts (``pipelines.attribution``), scores them all in one call, and returns the verdicts with
``model_spans`` set. At most ``max_variants`` variants go into the call (the model's batch
limit): escalations past it, in batch order, keep ``model_spans = None``. When the call fails,
every verdict is returned as it was: a verdict is never lost or held back for its explanation.
Each escalation is counted once in ``modstream_model_attribution_total`` by outcome
(``attributed``, ``failed``, ``skipped``). Never logs text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from common.logs import get_logger
from engine.inference import InferenceError, InferenceResult
from engine.metrics import Metrics
from pipelines.attribution import (
    DEFAULT_MAX_WORDS,
    DEFAULT_TOP_K,
    Variants,
    attribution_from,
    deciding_output,
    variants,
)
from pipelines.canonical import trace
from pipelines.canonical.offsets import OffsetError
from pipelines.verdict import DecidedBy, Verdict

__all__ = ["DEFAULT_MAX_VARIANTS", "attribute_escalations"]

_log = get_logger(__name__)

DEFAULT_MAX_VARIANTS = 256
"""The most variants one extra call carries (the served models' ``max_batch_size``)."""


class Inference(Protocol):
    async def infer(self, texts: Sequence[str]) -> InferenceResult: ...


def _wanted(verdict: Verdict) -> str | None:
    """The output to explain for ``verdict``, or ``None`` when it gets no attribution."""
    result = verdict.result
    if not result.escalate or result.decided_by is not DecidedBy.MODEL or verdict.scores is None:
        return None
    return deciding_output(result.reasons)


async def attribute_escalations(
    inference: Inference,
    verdicts: Sequence[Verdict],
    raw_texts: Sequence[str],
    model_texts: Sequence[str],
    metrics: Metrics,
    *,
    top_k: int = DEFAULT_TOP_K,
    max_words: int = DEFAULT_MAX_WORDS,
    max_variants: int = DEFAULT_MAX_VARIANTS,
) -> list[Verdict]:
    """``verdicts`` with ``model_spans`` set on the escalated ones the model decided (module
    docs). ``raw_texts[i]`` and ``model_texts[i]`` are the raw and canonical texts of
    ``verdicts[i]``."""
    out = list(verdicts)
    chosen: list[tuple[int, str, Variants]] = []
    budget = max_variants
    skipped = 0
    for i, verdict in enumerate(verdicts):
        output = _wanted(verdict)
        if output is None:
            continue
        found = variants(model_texts[i], max_words)
        if not found.texts:
            continue  # no word to leave out: nothing to explain, nothing to count
        if len(found.texts) > budget:
            skipped += 1
            continue
        budget -= len(found.texts)
        chosen.append((i, output, found))
    if skipped:
        metrics.model_attribution_total.labels("skipped").inc(skipped)
    if not chosen:
        return out
    texts = [text for _, _, found in chosen for text in found.texts]
    started = time.perf_counter()
    try:
        result = await inference.infer(texts)
    except InferenceError as exc:
        metrics.model_attribution_total.labels("failed").inc(len(chosen))
        _log.warning("attribution_failed", error=type(exc).__name__, items=len(chosen))
        return out
    metrics.model_attribution_seconds.observe(time.perf_counter() - started)
    at = 0
    attributed = failed = 0
    for i, output, found in chosen:
        scored = result.scores[at : at + len(found.texts)]
        at += len(found.texts)
        full = verdicts[i].scores
        if full is None:  # _wanted checked; for the type checker
            continue
        try:
            offsets = trace(raw_texts[i]).text_map
            if len(offsets) != len(model_texts[i]):
                raise OffsetError("the canonical text is not the raw text's")
            spans = attribution_from(found, offsets, full, output, scored, top_k)
        except OffsetError:
            failed += 1  # the model text is not this text's canonical form: no spans at all
            continue
        out[i] = replace(verdicts[i], model_spans=spans)
        attributed += 1
    if attributed:
        metrics.model_attribution_total.labels("attributed").inc(attributed)
    if failed:
        metrics.model_attribution_total.labels("failed").inc(failed)
    return out
