"""Moderators' decisions with the scores of the verdicts they reviewed (for calibration).

Read through the analysts' views (``analytics_review_items``, ``analytics_verdicts``), so
``modstream policy calibrate`` needs no more than the read-only analyst login. A decision is
*harmful* when the moderator did anything but approve (as in ``analytics_model_agreement``).

A verdict's scores come from the model that decided it, and, where a rescan read the verdict
after a moderator decided it (the decision stood), also from the rescan's model (the
``rescan_*`` columns beside it): so a candidate version can be calibrated against the decisions
moderators made before it decided anything (``--model moderation:2``).

``--tenant T`` reads only the decisions on tenant ``T``'s verdicts: the one filter below,
:data:`TENANT_FILTER`, on the verdicts' ``tenant`` column.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.stores.database import STORE_DRIVER_ERRORS, Database, store_failure
from pipelines.scores import ModelScores
from pipelines.verdict_codec import scores_from_json

__all__ = [
    "TENANT_FILTER",
    "ModeratorDecision",
    "ModeratorDecisionStore",
]

_SELECT_DECISIONS = """
SELECT r.category, r.resolution <> 'approve' AS harmful, m.scores::text AS scores,
       m.model_version
FROM analytics_review_items r
JOIN analytics_verdicts v
  ON v.source_topic = r.source_topic AND v.source_partition = r.source_partition
 AND v.source_offset = r.source_offset AND v.sent_at = r.sent_at
CROSS JOIN LATERAL (
    VALUES (v.scores, v.model_name, v.model_version, false),
           (v.rescan_scores, v.rescan_model_name, v.rescan_model_version, true)
) AS m(scores, model_name, model_version, beside)
WHERE r.status = 'resolved' AND r.resolution IS NOT NULL AND r.category IS NOT NULL
  AND r.resolved_at >= $1 AND r.resolved_at < $2
  AND m.scores IS NOT NULL AND m.model_name = $3
  AND ($4::text IS NULL OR m.model_version = $4)
  -- one decision counts once per model version
  AND NOT (m.beside AND (v.model_name, v.model_version)
                        IS NOT DISTINCT FROM (m.model_name, m.model_version))
"""

TENANT_FILTER = """
  AND v.tenant = $5
"""
"""Appended to the decisions' query for one tenant's calibration (``$5``: the tenant id)."""


@dataclass(frozen=True, slots=True)
class ModeratorDecision:
    """One resolved review item of a model-scored verdict."""

    category: str
    """The category the item was filed under (the verdict's at escalation)."""
    scores: ModelScores
    harmful: bool
    model_version: str | None


class ModeratorDecisionStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def decisions(
        self,
        since: datetime,
        until: datetime,
        model_name: str,
        model_version: str | None,
        *,
        tenant: str | None = None,
    ) -> list[ModeratorDecision]:
        """Decisions resolved in ``[since, until)`` on verdicts scored by the model (any
        version when ``model_version`` is ``None``), only ``tenant``'s when one is given."""
        pool = self._database.pool()
        try:
            if tenant is None:
                rows = await pool.fetch(_SELECT_DECISIONS, since, until, model_name, model_version)
            else:
                rows = await pool.fetch(
                    _SELECT_DECISIONS + TENANT_FILTER,
                    since,
                    until,
                    model_name,
                    model_version,
                    tenant,
                )
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "decisions read") from exc
        decided: list[ModeratorDecision] = []
        for row in rows:
            scores = scores_from_json(row["scores"])
            if scores is not None:
                decided.append(
                    ModeratorDecision(row["category"], scores, row["harmful"], row["model_version"])
                )
        return decided
