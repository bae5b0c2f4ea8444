"""The rules step both services run: one canonical text, the engine in use, its hit counts.

:meth:`RuleStage.evaluate` canonicalises a message once and hands that one canonical text to the
rule engine and, through ``Work.model_text``, to the model, so neither does it again. The engine
is the one in use now: a reload of the rule file (``worker.rules_watch``) swaps it here, and
records already evaluated keep their outcome.
"""

from __future__ import annotations

from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleOutcome
from pipelines.rules import RuleEngine
from worker.metrics import Metrics

__all__ = ["RuleStage"]


class RuleStage:
    def __init__(self, engine: RuleEngine, metrics: Metrics) -> None:
        self.engine = engine
        self._metrics = metrics

    def evaluate(self, message: ChatMessage) -> tuple[RuleOutcome, str]:
        """The rule outcome of ``message`` and the canonical text the model scores."""
        canonical = canonicalize(message.text)
        outcome = self.engine.evaluate(message, canonical)
        for hit in outcome.hits:
            self._metrics.rule_hits_total.labels(hit.category).inc()
        return outcome, canonical.text

    def install(self, engine: RuleEngine) -> None:
        """Use ``engine`` for every message evaluated from now on (a reloaded rule file)."""
        self.engine = engine
        self._metrics.rules_reloads_total.labels("installed").inc()

    def reject(self, _error: Exception) -> None:
        """Count a rule file that failed to load (the running engine stays)."""
        self._metrics.rules_reloads_total.labels("rejected").inc()
