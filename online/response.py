"""An online answer as a ``CheckMessageResponse``: built from the published verdict record.

Fresh and replayed answers both start from the record ``pipelines.verdict_codec`` publishes (of a
``Verdict`` or of a stored row), so the caller and the consumers of ``moderation.verdicts`` see
the same fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from online.api import moderation_pb2 as pb
from online.moderator import Answer

__all__ = ["check_response"]


def _str(value: object) -> str:
    return "" if value is None else str(value)


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _scores(record: Mapping[str, object]) -> dict[str, pb.TaskScores]:
    scores: Any = record.get("scores") or {}
    labels: Any = record.get("labels") or {}
    return {
        str(task): pb.TaskScores(
            probabilities={str(k): float(v) for k, v in probabilities.items()},
            label=_str(labels.get(task)),
        )
        for task, probabilities in scores.items()
    }


def check_response(answer: Answer) -> pb.CheckMessageResponse:
    """The gRPC response for ``answer``."""
    record = answer.record
    hits: Any = record.get("rule_hits") or []
    reasons: Any = record.get("reasons") or []
    latency = answer.latency
    return pb.CheckMessageResponse(
        message_id=_str(record.get("message_id")),
        decision=_str(record.get("decision")),
        decided_by=_str(record.get("decided_by")),
        escalate=bool(record.get("escalate")),
        category=_str(record.get("category")),
        priority=_float(record.get("priority")),
        reasons=[str(r) for r in reasons],
        rule_hits=[
            pb.RuleHit(
                rule_id=_str(h.get("rule_id")),
                category=_str(h.get("category")),
                severity=_str(h.get("severity")),
                action=_str(h.get("action")),
            )
            for h in hits
        ],
        scores=_scores(record),
        model_name=_str(record.get("model_name")),
        model_version=_str(record.get("model_version")),
        latency=pb.Latency(
            rules_ms=latency.rules_ms,
            queue_ms=latency.queue_ms,
            inference_ms=latency.inference_ms,
            total_ms=latency.total_ms,
        ),
        replayed=answer.replayed,
        source_offset=_int(record.get("source_offset")),
    )
