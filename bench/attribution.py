"""``python -m bench.attribution``: the extra model time of explaining an escalated message.

The worker explains each escalated verdict the model decided by scoring its canonical text once
more per word left out (``pipelines.attribution``; at most 32 words), the variants of a batch's
escalations in one extra call (``engine.attribution``). This measures that call with the served
moderation model in process (``modelbuild.whole_decision.served_scorer``: tokenizer, encoder,
heads, as Triton runs them, float32 encoder), on the sample chat lines of
``pipelines/samples/chat.jsonl``.

Every sample line is explained as if escalated (its deciding output, or
``toxicity.offensive_or_hate`` when the default policy gives it none: the cost depends on the
words, not on the output), ``--per-call`` escalations to an extra call, as a batch with that
many escalations makes; the ordinary scoring of the same lines in one batch is measured
alongside, alternating, so load from other jobs falls on both alike. Wall and CPU time
(``time.process_time``: all threads of this process).

Last line: ``extra_ms_per_escalated=… extra_cpu_ms_per_escalated=… words_per_escalated=…
scoring_ms_per_message=… ratio=… escalated_samples=…`` (ratio = extra per escalated message /
ordinary scoring per message; ``escalated_samples``: lines the default policy escalates on the
model's word).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.models import REPOSITORY, sample_messages
from pipelines.attribution import attribution_from, deciding_output, variants
from pipelines.canonical import trace
from pipelines.policy import PolicyThresholds, decide
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy

if TYPE_CHECKING:
    from modelbuild.whole_decision import Scorer

__all__ = ["main"]

_FALLBACK_OUTPUT = "toxicity.offensive_or_hate"


def _explain(
    score: Scorer, texts: Sequence[str], full: Sequence[ModelScores], outputs: Sequence[str]
) -> int:
    """One extra call for the variants of ``texts`` (raw); the attributions are built as the
    worker builds them. Returns the variants scored."""
    traced = [trace(text) for text in texts]
    found = [variants(t.canonical.text) for t in traced]
    batch = [variant for f in found for variant in f.texts]
    scored = score(batch) if batch else []
    at = 0
    for t, f, row, output in zip(traced, found, full, outputs, strict=True):
        attribution_from(f, t.text_map, row, output, scored[at : at + len(f.texts)])
        at += len(f.texts)
    return len(batch)


def main(argv: list[str] | None = None) -> int:
    from modelbuild.whole_decision import served_scorer

    parser = argparse.ArgumentParser(prog="python -m bench.attribution", description=__doc__)
    parser.add_argument("--repository", type=Path, default=REPOSITORY)
    parser.add_argument("--model", default="moderation")
    parser.add_argument("--threads", type=int, default=2, help="encoder intra-op threads (ort)")
    parser.add_argument("--per-call", type=int, default=4, help="escalations per extra call")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the sample lines")
    args = parser.parse_args(argv)

    score = served_scorer(args.repository, args.model, args.threads)
    messages = sample_messages()
    canonical = [trace(text).canonical.text for text in messages]
    full = list(score(canonical))
    thresholds = PolicyThresholds()
    outputs: list[str] = []
    escalated = 0
    for row in full:
        result = decide(RuleOutcome(), row, thresholds)
        output = deciding_output(result.reasons)
        if result.escalate and result.decided_by is DecidedBy.MODEL and output is not None:
            escalated += 1
        outputs.append(output or _FALLBACK_OUTPUT)

    extra_wall = extra_cpu = base_wall = base_cpu = 0.0
    explained = scored_variants = scored_messages = 0
    for _ in range(args.rounds):
        started, cpu = time.perf_counter(), time.process_time()
        score(canonical)
        base_wall += time.perf_counter() - started
        base_cpu += time.process_time() - cpu
        scored_messages += len(canonical)
        for low in range(0, len(messages), args.per_call):
            high = low + args.per_call
            started, cpu = time.perf_counter(), time.process_time()
            scored_variants += _explain(
                score, messages[low:high], full[low:high], outputs[low:high]
            )
            extra_wall += time.perf_counter() - started
            extra_cpu += time.process_time() - cpu
            explained += len(messages[low:high])

    extra_ms = 1000.0 * extra_wall / explained
    base_ms = 1000.0 * base_wall / scored_messages
    print(
        f"{len(messages)} sample lines x {args.rounds} rounds, {args.per_call} escalations per "
        f"extra call, model {args.model}, {args.threads} encoder threads"
    )
    print(
        f"extra_ms_per_escalated={extra_ms:.1f} "
        f"extra_cpu_ms_per_escalated={1000.0 * extra_cpu / explained:.1f} "
        f"words_per_escalated={scored_variants / explained:.1f} "
        f"scoring_ms_per_message={base_ms:.2f} ratio={extra_ms / base_ms:.1f} "
        f"escalated_samples={escalated}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
