"""An online answer as a ``CheckMessageResponse``, built from the typed ``Verdict``.

Fresh and replayed answers both start from a ``Verdict`` (the one just stored, or the stored row
read back with ``pipelines.verdict_codec.verdict_from_row``), so the caller and the consumers of
``moderation.verdicts`` see the same values.
"""

from __future__ import annotations

from online.api import moderation_pb2 as pb
from online.moderator import Answer
from pipelines.attribution import ModelAttribution
from pipelines.scores import ModelScores

__all__ = ["check_response"]


def _scores(scores: ModelScores | None) -> dict[str, pb.TaskScores]:
    """Each task's probabilities and most probable label; ``harms`` (from a model with that
    output) has independent probabilities and no label (empty)."""
    if scores is None:
        return {}
    labels = scores.labels()
    return {
        task: pb.TaskScores(probabilities=probabilities, label=labels.get(task, ""))
        for task, probabilities in scores.as_dict().items()
    }


def _model_spans(attribution: ModelAttribution | None) -> pb.ModelSpans | None:
    """The words that moved the model, as offsets and drops (``None``: unset in the answer)."""
    if attribution is None:
        return None
    return pb.ModelSpans(
        output=attribution.output,
        spans=[
            pb.ModelSpan(span=pb.TextSpan(start=s.start, end=s.end), drop=s.drop)
            for s in attribution.spans
        ],
    )


def check_response(answer: Answer) -> pb.CheckMessageResponse:
    """The gRPC response for ``answer``."""
    verdict, latency = answer.verdict, answer.latency
    result = verdict.result
    return pb.CheckMessageResponse(
        message_id=verdict.message_id,
        decision=result.decision.value,
        decided_by=result.decided_by.value,
        escalate=result.escalate,
        category=result.category or "",
        priority=result.priority,
        reasons=result.reasons,
        rule_hits=[
            pb.RuleHit(
                rule_id=hit.rule_id,
                category=hit.category,
                severity=hit.severity.name.lower(),
                action=hit.action.value,
                spans=[pb.TextSpan(start=start, end=end) for start, end in hit.spans],
            )
            for hit in verdict.rule_hits
        ],
        scores=_scores(verdict.scores),
        model_name=verdict.model_name or "",
        model_version=verdict.model_version or "",
        latency=pb.Latency(
            rules_ms=latency.rules_ms,
            queue_ms=latency.queue_ms,
            inference_ms=latency.inference_ms,
            total_ms=latency.total_ms,
        ),
        replayed=answer.replayed,
        source_offset=verdict.position.offset,
        model_spans=_model_spans(verdict.model_spans),
    )
