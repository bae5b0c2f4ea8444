"""The thresholds every decision uses now: one holder, swapped when a policy file changes.

The batch processor, the re-scorer, the shadow scorer and a rescan read
:meth:`PolicyStage.thresholds_for` the message's tenant (``ChatMessage.tenant``) at each
decision, so a reloaded policy file (``engine.policy_watch``, the default tenant's;
``engine.tenant_policy_watch``, a tenant's) applies from the next batch on; verdicts already
decided keep theirs. A tenant without a policy file of its own (or whose file never loaded)
decides with the default tenant's thresholds, :attr:`PolicyStage.thresholds`.

The default tenant's thresholds are exported as ``modstream_policy_threshold{threshold}``, the
number of tenants with their own as ``modstream_policy_tenants`` (no per-tenant label: the set
of tenants is not bounded by the metrics), and reloads, every tenant's together, as
``modstream_policy_reloads_total{result}`` (installed / rejected).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

from engine.metrics import Metrics
from pipelines.policy import PolicyThresholds
from pipelines.tenants import is_default

__all__ = ["CurrentPolicy", "PolicyStage"]


class CurrentPolicy(Protocol):
    """Where a decision reads its thresholds (a :class:`PolicyStage`)."""

    @property
    def thresholds(self) -> PolicyThresholds: ...

    def thresholds_for(self, tenant: str | None) -> PolicyThresholds: ...


class PolicyStage:
    def __init__(self, thresholds: PolicyThresholds, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self._thresholds = thresholds
        self._tenants: dict[str, PolicyThresholds] = {}
        self._publish()

    @property
    def thresholds(self) -> PolicyThresholds:
        """The default tenant's thresholds."""
        return self._thresholds

    def thresholds_for(self, tenant: str | None) -> PolicyThresholds:
        """The thresholds ``tenant``'s messages are decided with: its own policy file's, or the
        default tenant's when it has none (``None`` is the default tenant)."""
        if tenant is None or is_default(tenant):
            return self._thresholds
        return self._tenants.get(tenant, self._thresholds)

    @property
    def tenants(self) -> Mapping[str, PolicyThresholds]:
        """The tenants with thresholds of their own (a read-only view)."""
        return MappingProxyType(self._tenants)

    def install(self, thresholds: PolicyThresholds) -> None:
        """Decide with ``thresholds`` from now on (a reloaded policy file)."""
        self._thresholds = thresholds
        self._publish()
        self._count("installed")

    def install_tenant(self, tenant: str, thresholds: PolicyThresholds) -> None:
        """Decide ``tenant``'s messages with ``thresholds`` from now on (its file (re)loaded)."""
        self._tenants[tenant] = thresholds
        self._count("installed")

    def remove_tenant(self, tenant: str) -> None:
        """``tenant`` goes back to the default tenant's thresholds (its file was removed)."""
        if self._tenants.pop(tenant, None) is not None:
            self._count(None)

    def reject(self, _error: Exception) -> None:
        """Count a policy file that failed to load (the thresholds in use stay)."""
        self._count("rejected")

    def _count(self, result: str | None) -> None:
        if self._metrics is None:
            return
        if result is not None:
            self._metrics.policy_reloads_total.labels(result).inc()
        self._metrics.policy_tenants.set(len(self._tenants))

    def _publish(self) -> None:
        if self._metrics is None:
            return
        for item in dataclasses.fields(self._thresholds):
            value = getattr(self._thresholds, item.name)
            self._metrics.policy_threshold.labels(item.name).set(value)
