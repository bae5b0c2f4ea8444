"""The thresholds every decision uses now: one holder, swapped when the policy file changes.

The batch processor, the re-scorer, the shadow scorer and a rescan read
:attr:`PolicyStage.thresholds` at each decision, so a reloaded policy file
(``engine.policy_watch``) applies from the next batch on; verdicts already decided keep theirs.
The thresholds in use are exported as ``modstream_policy_threshold{threshold}`` and reloads as
``modstream_policy_reloads_total{result}`` (installed / rejected).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from engine.metrics import Metrics
from pipelines.policy import PolicyThresholds

__all__ = ["CurrentPolicy", "PolicyStage"]


class CurrentPolicy(Protocol):
    """Where a decision reads its thresholds (a :class:`PolicyStage`)."""

    @property
    def thresholds(self) -> PolicyThresholds: ...


class PolicyStage:
    def __init__(self, thresholds: PolicyThresholds, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self._thresholds = thresholds
        self._publish()

    @property
    def thresholds(self) -> PolicyThresholds:
        return self._thresholds

    def install(self, thresholds: PolicyThresholds) -> None:
        """Decide with ``thresholds`` from now on (a reloaded policy file)."""
        self._thresholds = thresholds
        self._publish()
        if self._metrics is not None:
            self._metrics.policy_reloads_total.labels("installed").inc()

    def reject(self, _error: Exception) -> None:
        """Count a policy file that failed to load (the thresholds in use stay)."""
        if self._metrics is not None:
            self._metrics.policy_reloads_total.labels("rejected").inc()

    def _publish(self) -> None:
        if self._metrics is None:
            return
        for item in dataclasses.fields(self._thresholds):
            value = getattr(self._thresholds, item.name)
            self._metrics.policy_threshold.labels(item.name).set(value)
