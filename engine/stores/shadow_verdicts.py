"""The shadow model's decisions (``shadow_verdicts``), keyed like the verdicts they shadow.

One row per record and shadow model version, written outside the verdict transaction (the
shadow never delays a live verdict) and idempotent on its key, so a replayed batch writes
nothing twice. The analysts' view ``analytics_shadow_agreement`` (migration 0080) compares
these rows with the live verdicts and the moderators' decisions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import orjson

from engine.stores.arrays import position_arrays
from engine.stores.database import STORE_DRIVER_ERRORS, Database, store_failure
from pipelines.verdict import Verdict

__all__ = ["ShadowVerdictStore"]

_INSERT_SHADOW_VERDICTS = """
INSERT INTO shadow_verdicts (
    source_topic, source_partition, source_offset, sent_at, model_name, model_version,
    decision, escalated, category, priority, reasons, scores, batch_id, inference_ms)
SELECT t, p, o, s, mn, mv, d, e, c, pr, ARRAY(SELECT jsonb_array_elements_text(rs::jsonb)),
       sc::jsonb, b, i
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[],
            $7::text[], $8::bool[], $9::text[], $10::real[], $11::text[], $12::text[],
            $13::uuid[], $14::real[])
     AS x(t, p, o, s, mn, mv, d, e, c, pr, rs, sc, b, i)
ON CONFLICT DO NOTHING
"""


class ShadowVerdictStore:
    """Writes the shadow model's verdicts (only their model-dependent fields and key)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def write(self, verdicts: Sequence[Verdict]) -> None:
        """Store ``verdicts`` (each has scores, a model name and version); ``StoreError`` when
        PostgreSQL is away or refuses them."""
        if not verdicts:
            return
        topics, partitions, offsets = position_arrays(v.position for v in verdicts)
        args = [
            topics,
            partitions,
            offsets,
            [v.sent_at for v in verdicts],
            [v.model_name or "" for v in verdicts],
            [v.model_version or "" for v in verdicts],
            [v.result.decision.value for v in verdicts],
            [v.result.escalate for v in verdicts],
            [v.result.category for v in verdicts],
            [v.result.priority for v in verdicts],
            [orjson.dumps(list(v.result.reasons)).decode() for v in verdicts],
            [orjson.dumps(v.scores.as_dict()).decode() if v.scores else None for v in verdicts],
            [uuid.UUID(v.batch_id) if v.batch_id else None for v in verdicts],
            [v.inference_ms for v in verdicts],
        ]
        try:
            await self._database.pool().execute(_INSERT_SHADOW_VERDICTS, *args)
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "shadow write") from exc
