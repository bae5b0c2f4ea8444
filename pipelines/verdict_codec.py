"""Every stored and published form of a ``Verdict``, in one place.

Three shapes, and the conversions between them:

* the **row**: the values of one ``verdicts`` row, column by column (``VERDICT_COLUMNS``), and
  back to a ``Verdict`` (``verdict_from_row``: the online service answers a repeat from it);
* the **record** published to ``moderation.verdicts``: built from a ``Verdict`` right after it is
  stored, or from a stored row when the outbox relay sends it again. Both give the same JSON.

The record never contains the message text (nor its hash). Fields:

``schema_version`` (1), ``tenant`` (the message's community; ``default`` when it named none),
``message_id``, ``group_id``, ``sender_id``, ``source_topic``,
``source_partition``, ``source_offset``, ``decision`` (allow|flag|block), ``decided_by``
(rules|model|pending_model), ``escalate``, ``category`` (or null), ``priority`` (0..1),
``reasons`` (list of strings), ``rule_hits`` (list of ``{rule_id, category, severity, action}``,
with ``yields_to_model`` when set and ``spans``, ``[[start, end], ...]``, where the rule matched:
offsets into the raw message text in Unicode code points, end exclusive, absent when none),
``scores`` (``{task: {label: probability}}`` or null; the task ``harms`` only from a model with
the ``HARMS`` output), ``labels`` (``{task: label}`` for sentiment, intent and toxicity, or null),
``model_name``, ``model_version`` (or null), ``batch_id`` (or null), ``model_spans`` (the words
that moved the model's decision, for escalated verdicts the model decided, else null:
``{"output": "toxicity.hate", "spans": [{"span": [start, end], "drop": 0.41}, ...]}``, raw-text
offsets as for ``rule_hits``, largest drop first; ``pipelines.attribution``), ``sent_at`` and
``created_at`` (ISO-8601 UTC, ``Z`` suffix). Records are keyed by ``group_id`` like the input.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from pipelines.attribution import model_attribution_from_json
from pipelines.messages import SourcePosition
from pipelines.rule_hits import RuleAction, RuleHit, Severity, spans_from_json
from pipelines.scores import (
    HARM_LABELS,
    INTENT_LABELS,
    SENTIMENT_LABELS,
    TOXICITY_LABELS,
    ModelScores,
)
from pipelines.tenants import DEFAULT_TENANT
from pipelines.verdict import DecidedBy, Decision, PolicyResult, Verdict

__all__ = [
    "SCHEMA_VERSION",
    "VERDICT_COLUMNS",
    "VerdictRowKey",
    "encode_verdict_record",
    "hits_from_json",
    "record_from_row",
    "row_kafka_record",
    "row_key",
    "scores_from_json",
    "verdict_from_row",
    "verdict_kafka_records",
    "verdict_record",
    "verdict_row",
    "verdict_row_key",
]

SCHEMA_VERSION = 1

VERDICT_COLUMNS: tuple[str, ...] = (
    "source_topic",
    "source_partition",
    "source_offset",
    "sent_at",
    "message_id",
    "group_id",
    "sender_id",
    "text_sha256",
    "decision",
    "decided_by",
    "escalated",
    "category",
    "priority",
    "reasons",
    "rule_hits",
    "scores",
    "sentiment_label",
    "intent_label",
    "toxicity_label",
    "model_name",
    "model_version",
    "batch_id",
    "queue_ms",
    "inference_ms",
    "model_spans",
    "tenant",
)
"""The ``verdicts`` columns a verdict fills, in the order of ``verdict_row``."""

VerdictRowKey = tuple[SourcePosition, datetime]
"""What identifies a stored verdict row: its Kafka coordinates and ``sent_at`` (the partition
key of the ``verdicts`` table)."""


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def _json(value: object) -> Any:
    """A JSON column as read: text (parsed here) or already parsed by the driver."""
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _utc_iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # decoded messages are always aware; be lenient
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# -- Verdict -> row ---------------------------------------------------------------------------


def verdict_row(verdict: Verdict) -> tuple[Any, ...]:
    """The values of ``verdict``'s row, one per ``VERDICT_COLUMNS`` entry.

    ``reasons``, ``rule_hits``, ``scores`` and ``model_spans`` are JSON text (the SQL casts
    them); ``batch_id`` is a ``UUID``.
    """
    result = verdict.result
    scores = verdict.scores
    labels = scores.labels() if scores is not None else {}
    return (
        verdict.position.topic,
        verdict.position.partition,
        verdict.position.offset,
        verdict.sent_at,
        verdict.message_id,
        verdict.group_id,
        verdict.sender_id,
        verdict.text_sha256,
        result.decision.value,
        result.decided_by.value,
        result.escalate,
        result.category,
        result.priority,
        _dumps(list(result.reasons)),
        _dumps([hit.as_dict() for hit in verdict.rule_hits]),
        _dumps(scores.as_dict()) if scores is not None else None,
        labels.get("sentiment"),
        labels.get("intent"),
        labels.get("toxicity"),
        verdict.model_name,
        verdict.model_version,
        uuid.UUID(verdict.batch_id) if verdict.batch_id else None,
        verdict.queue_ms,
        verdict.inference_ms,
        _dumps(verdict.model_spans.as_dict()) if verdict.model_spans is not None else None,
        verdict.tenant,
    )


def verdict_row_key(verdict: Verdict) -> VerdictRowKey:
    """The key of ``verdict``'s stored row."""
    return (verdict.position, verdict.sent_at)


def hits_from_json(items: Sequence[Mapping[str, Any]]) -> tuple[RuleHit, ...]:
    """Rule hits as stored in ``verdicts.rule_hits`` (``RuleHit.as_dict``), back as objects."""
    return tuple(
        RuleHit(
            rule_id=str(item["rule_id"]),
            category=str(item["category"]),
            severity=Severity[str(item["severity"]).upper()],
            action=RuleAction(str(item["action"])),
            yields_to_model=item.get("yields_to_model") is True,
            spans=spans_from_json(item.get("spans")),
        )
        for item in items
    )


def scores_from_json(value: Any) -> ModelScores | None:
    """A ``verdicts.scores`` value (JSON text or parsed) back as ``ModelScores`` (or ``None``).
    A value without ``harms`` (stored from a model without that output) gives ``harms=None``."""
    scores = _json(value)
    if scores is None:
        return None
    harms = scores.get("harms")
    return ModelScores(
        sentiment=tuple(float(scores["sentiment"][label]) for label in SENTIMENT_LABELS),
        intent=tuple(float(scores["intent"][label]) for label in INTENT_LABELS),
        toxicity=tuple(float(scores["toxicity"][label]) for label in TOXICITY_LABELS),
        harms=None if harms is None else tuple(float(harms[label]) for label in HARM_LABELS),
    )


def verdict_from_row(row: Mapping[str, Any]) -> Verdict:
    """The ``Verdict`` a stored row holds (the inverse of ``verdict_row``)."""
    inference_ms = row["inference_ms"]
    return Verdict(
        position=SourcePosition(
            row["source_topic"], int(row["source_partition"]), int(row["source_offset"])
        ),
        message_id=row["message_id"],
        group_id=row["group_id"],
        sender_id=row["sender_id"],
        sent_at=row["sent_at"],
        text_sha256=row["text_sha256"],
        rule_hits=hits_from_json(_json(row["rule_hits"]) or []),
        scores=scores_from_json(row["scores"]),
        result=PolicyResult(
            decision=Decision(row["decision"]),
            decided_by=DecidedBy(row["decided_by"]),
            escalate=bool(row["escalated"]),
            category=row["category"],
            priority=float(row["priority"]),
            reasons=tuple(row["reasons"] or ()),
        ),
        model_name=row["model_name"],
        model_version=row["model_version"],
        batch_id=str(row["batch_id"]) if row["batch_id"] is not None else None,
        queue_ms=float(row["queue_ms"]),
        inference_ms=float(inference_ms) if inference_ms is not None else None,
        model_spans=model_attribution_from_json(_json(row.get("model_spans"))),
        tenant=str(row.get("tenant") or DEFAULT_TENANT),
    )


# -- Verdict -> record ------------------------------------------------------------------------


def verdict_record(verdict: Verdict, *, created_at: datetime) -> dict[str, object]:
    """The published form of ``verdict``; ``created_at`` must be timezone-aware."""
    if created_at.tzinfo is None or created_at.utcoffset() is None:
        raise ValueError("created_at must be timezone-aware")
    result = verdict.result
    scores = verdict.scores
    return {
        "schema_version": SCHEMA_VERSION,
        "tenant": verdict.tenant,
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
        "model_spans": verdict.model_spans.as_dict() if verdict.model_spans is not None else None,
        "sent_at": _utc_iso(verdict.sent_at),
        "created_at": _utc_iso(created_at),
    }


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


# -- row -> record ----------------------------------------------------------------------------


def record_from_row(row: Mapping[str, Any]) -> dict[str, object]:
    """The published record of a stored row (same fields as ``verdict_record``; ``created_at``
    is when the verdict was last decided, i.e. the row's ``updated_at``)."""
    scores = _json(row["scores"])
    labels = (
        {
            "sentiment": row["sentiment_label"],
            "intent": row["intent_label"],
            "toxicity": row["toxicity_label"],
        }
        if scores is not None
        else None
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "tenant": str(row.get("tenant") or DEFAULT_TENANT),
        "message_id": row["message_id"],
        "group_id": row["group_id"],
        "sender_id": row["sender_id"],
        "source_topic": row["source_topic"],
        "source_partition": int(row["source_partition"]),
        "source_offset": int(row["source_offset"]),
        "decision": row["decision"],
        "decided_by": row["decided_by"],
        "escalate": bool(row["escalated"]),
        "category": row["category"],
        "priority": float(row["priority"]),
        "reasons": list(row["reasons"] or []),
        "rule_hits": _json(row["rule_hits"]) or [],
        "scores": scores,
        "labels": labels,
        "model_name": row["model_name"],
        "model_version": row["model_version"],
        "batch_id": str(row["batch_id"]) if row["batch_id"] is not None else None,
        "model_spans": _json(row.get("model_spans")),
        "sent_at": _utc_iso(row["sent_at"]),
        "created_at": _utc_iso(row["updated_at"]),
    }


def row_kafka_record(row: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """The ``(key, value)`` record of a stored row, keyed by group (as the stream keys it)."""
    return (str(row["group_id"]).encode("utf-8"), orjson.dumps(record_from_row(row)))


def row_key(row: Mapping[str, Any]) -> VerdictRowKey:
    """The key of a stored row as read back (the same key ``verdict_row_key`` gives)."""
    position = SourcePosition(
        row["source_topic"], int(row["source_partition"]), int(row["source_offset"])
    )
    return (position, row["sent_at"])
