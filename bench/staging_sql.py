"""SQL for the COPY alternative of ``bench.sink``: a staging table and the insert that drains it.

``COPY`` cannot say ``ON CONFLICT``, so the rows go to a session-local staging table first
(emptied at commit) and one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` moves them into
``verdicts``, with the same conversions the ``unnest`` insert makes (``reasons`` from JSON text
to ``text[]``, the JSON columns to ``jsonb``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["VERDICT_STAGE_TYPES", "insert_from_staging_sql", "staging_table_sql"]

VERDICT_STAGE_TYPES: Mapping[str, str] = {
    "source_topic": "text",
    "source_partition": "integer",
    "source_offset": "bigint",
    "sent_at": "timestamptz",
    "message_id": "text",
    "group_id": "text",
    "sender_id": "text",
    "text_sha256": "text",
    "decision": "text",
    "decided_by": "text",
    "escalated": "boolean",
    "category": "text",
    "priority": "real",
    "reasons": "text",
    "rule_hits": "text",
    "scores": "text",
    "sentiment_label": "text",
    "intent_label": "text",
    "toxicity_label": "text",
    "model_name": "text",
    "model_version": "text",
    "batch_id": "uuid",
    "queue_ms": "real",
    "inference_ms": "real",
    "model_spans": "text",
    "tenant": "text",
}
"""Staging column types for ``verdict_row``'s values (JSON columns arrive as text)."""

_CONVERSIONS: Mapping[str, str] = {
    "reasons": "ARRAY(SELECT jsonb_array_elements_text({c}::jsonb))",
    "rule_hits": "{c}::jsonb",
    "scores": "{c}::jsonb",
    "model_spans": "{c}::jsonb",
}


def _identifier(name: str) -> str:
    if not name.replace("_", "").isalnum() or name[0].isdigit():
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return name


def staging_table_sql(stage: str, columns: Sequence[str], types: Mapping[str, str]) -> str:
    """``CREATE TEMP TABLE IF NOT EXISTS`` for ``columns`` (rows deleted at each commit)."""
    body = ", ".join(f"{_identifier(c)} {types[c]}" for c in columns)
    return f"CREATE TEMP TABLE IF NOT EXISTS {_identifier(stage)} ({body}) ON COMMIT DELETE ROWS"


def insert_from_staging_sql(target: str, stage: str, columns: Sequence[str]) -> str:
    """Move the staged rows into ``target``, converting JSON text, skipping existing keys."""
    names = ", ".join(_identifier(c) for c in columns)
    values = ", ".join(_CONVERSIONS.get(c, "{c}").format(c=c) for c in columns)
    # Every name passed _identifier; no values are interpolated.
    return (
        f"INSERT INTO {_identifier(target)} ({names}) "  # noqa: S608
        f"SELECT {values} FROM {_identifier(stage)} ON CONFLICT DO NOTHING"
    )
