"""The record published to ``moderation.verdicts``: a JSON-ready view of a ``Verdict``.

It never contains the message text (nor its hash). Fields:

``schema_version`` (1), ``message_id``, ``group_id``, ``sender_id``, ``source_topic``,
``source_partition``, ``source_offset``, ``decision`` (allow|flag|block), ``decided_by``
(rules|model|pending_model), ``escalate``, ``category`` (or null; hate, offensive, spam,
advertisement, sexual, ... and the severe ones of ``pipelines.severe_harm``: threat, self_harm,
self_harm_incitement, sexual_exploitation, sexual_exploitation_minors), ``priority`` (0..1),
``reasons`` (list of strings), ``rule_hits`` (list of ``{rule_id, category, severity, action}``),
``scores`` (``{task: {label: probability}}`` or null), ``labels`` (``{task: label}`` or null),
``model_name``, ``model_version`` (or null), ``batch_id`` (or null), ``sent_at`` and
``created_at`` (ISO-8601 UTC, ``Z`` suffix).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson

from pipelines.verdict import Verdict

__all__ = ["SCHEMA_VERSION", "encode_verdict_record", "verdict_kafka_records", "verdict_record"]

SCHEMA_VERSION = 1


def verdict_record(verdict: Verdict, *, created_at: datetime) -> dict[str, object]:
    """The published form of ``verdict``; ``created_at`` must be timezone-aware."""
    if created_at.tzinfo is None or created_at.utcoffset() is None:
        raise ValueError("created_at must be timezone-aware")
    result = verdict.result
    scores = verdict.scores
    return {
        "schema_version": SCHEMA_VERSION,
        "message_id": verdict.message_id,
        "group_id": verdict.group_id,
        "sender_id": verdict.sender_id,
        "source_topic": verdict.position.topic,
        "source_partition": verdict.position.partition,
        "source_offset": verdict.position.offset,
        "decision": result.decision.value,
        "decided_by": result.decided_by.value,
        "escalate": result.escalate,
        "category": result.category,
        "priority": result.priority,
        "reasons": list(result.reasons),
        "rule_hits": [hit.as_dict() for hit in verdict.rule_hits],
        "scores": scores.as_dict() if scores is not None else None,
        "labels": scores.labels() if scores is not None else None,
        "model_name": verdict.model_name,
        "model_version": verdict.model_version,
        "batch_id": verdict.batch_id,
        "sent_at": _utc_iso(verdict.sent_at),
        "created_at": _utc_iso(created_at),
    }


def _utc_iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # decoded messages are always aware; be lenient
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def encode_verdict_record(verdict: Verdict, *, created_at: datetime) -> bytes:
    """``verdict_record`` serialised as compact UTF-8 JSON (the Kafka record value)."""
    return orjson.dumps(verdict_record(verdict, created_at=created_at))


def verdict_kafka_records(
    verdicts: Sequence[Verdict], *, created_at: datetime
) -> list[tuple[bytes, bytes]]:
    """``(key, value)`` records for ``moderation.verdicts``, keyed by group like the input."""
    return [
        (v.group_id.encode("utf-8"), encode_verdict_record(v, created_at=created_at))
        for v in verdicts
    ]
