"""The rules step both services run: one canonical text, the engine in use, its hit counts.

:meth:`RuleStage.evaluate` canonicalises a message once and hands that one canonical text to the
rule engine and, through ``Work.model_text``, to the model, so neither does it again. The engine
is the one in use now for the message's tenant (``ChatMessage.tenant``): the default tenant uses
the default stack (``rules.path`` or the shipped set), a tenant with a rule file in
``rules.tenants_dir`` uses its own stack's engine, shared with every tenant of an equal stack
(``pipelines.rules.shared_engines``), and any other tenant the default. A reload of the rule
file (``engine.rules_watch``) or of a tenant's (``engine.tenant_rules_watch``) swaps the engine
here, and records already evaluated keep their outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from engine.metrics import Metrics
from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rule_hits import RuleOutcome
from pipelines.rules import RuleEngine
from pipelines.tenants import is_default

__all__ = ["RuleStage"]


class RuleStage:
    def __init__(self, engine: RuleEngine, metrics: Metrics) -> None:
        self.engine = engine
        """The default stack's engine."""
        self._tenants: dict[str, RuleEngine] = {}
        self._metrics = metrics
        self._count_engines()

    def evaluate(self, message: ChatMessage) -> tuple[RuleOutcome, str]:
        """The rule outcome of ``message`` under its tenant's rules and the canonical text the
        model scores."""
        canonical = canonicalize(message.text)
        outcome = self.engine_for(message.tenant).evaluate(message, canonical)
        for hit in outcome.hits:
            self._metrics.rule_hits_total.labels(hit.category).inc()
        return outcome, canonical.text

    def engine_for(self, tenant: str | None) -> RuleEngine:
        """The engine ``tenant``'s messages are evaluated with; a tenant without a rule file
        (or whose file never loaded) gets the default."""
        if is_default(tenant):
            return self.engine
        return self._tenants.get(tenant, self.engine) if tenant is not None else self.engine

    @property
    def tenants(self) -> Mapping[str, RuleEngine]:
        """The tenants with their own engine (a read-only view)."""
        return MappingProxyType(self._tenants)

    def engines(self) -> list[RuleEngine]:
        """The distinct engines in use: the default's, then the tenants'."""
        found = {id(self.engine): self.engine}
        for engine in self._tenants.values():
            found.setdefault(id(engine), engine)
        return list(found.values())

    def install(self, engine: RuleEngine) -> None:
        """Use ``engine`` for the default tenant from now on (a reloaded rule file)."""
        self.engine = engine
        self._metrics.rules_reloads_total.labels("installed").inc()
        self._count_engines()

    def install_tenant(self, tenant: str, engine: RuleEngine) -> None:
        """Use ``engine`` for ``tenant`` from now on (its rule file loaded or reloaded)."""
        self._tenants[tenant] = engine
        self._metrics.rules_reloads_total.labels("installed").inc()
        self._count_engines()

    def remove_tenant(self, tenant: str) -> None:
        """``tenant`` goes back to the default stack (its rule file was removed)."""
        if self._tenants.pop(tenant, None) is not None:
            self._count_engines()

    def reject(self, _error: Exception) -> None:
        """Count a rule file that failed to load (the engine in use stays)."""
        self._metrics.rules_reloads_total.labels("rejected").inc()

    def _count_engines(self) -> None:
        self._metrics.rule_engines.set(len(self.engines()))
