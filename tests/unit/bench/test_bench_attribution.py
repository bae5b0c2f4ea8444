"""bench.attribution: one extra call per group of escalations, every word's variant in it."""

from __future__ import annotations

from collections.abc import Sequence

from bench.attribution import _explain
from pipelines.scores import ModelScores

ROW = ModelScores((0.3, 0.4, 0.3), (0.7, 0.1, 0.1, 0.1), (0.2, 0.3, 0.5))


def test_one_call_scores_the_variants_of_every_escalation() -> None:
    calls: list[int] = []

    def score(texts: Sequence[str]) -> list[ModelScores]:
        calls.append(len(texts))
        return [ROW] * len(texts)

    texts = ["well f.u.c.k y0u", "go away now", "..."]
    assert _explain(score, texts, [ROW] * 3, ["toxicity.hate"] * 3) == 6
    assert calls == [6]
