"""The moderation daemon's settings: the shared sections (``engine.settings``) plus its own.

Loaded once at ``modstream worker``'s entry point (``MODSTREAM_BATCH__MAX_ITEMS=50`` ...; see
``common.settings`` for the naming); components receive their own section.
"""

from __future__ import annotations

from common.settings import ServiceSettings
from engine.settings import (
    BatchSettings,
    HttpSettings,
    InferenceSettings,
    PolicyFileSettings,
    ReliabilitySettings,
    RollupSettings,
    RulesSettings,
    TritonSettings,
)
from pipelines.policy import PolicyThresholds

__all__ = ["WorkerSettings"]


class WorkerSettings(ServiceSettings):
    """Everything ``modstream worker`` reads (and ``modstream rescore``)."""

    triton: TritonSettings = TritonSettings()
    inference: InferenceSettings = InferenceSettings()
    batch: BatchSettings = BatchSettings()
    policy: PolicyThresholds = PolicyThresholds()
    """Thresholds on model probabilities (``MODSTREAM_POLICY__BLOCK_HATE=0.9`` ...); the pure
    dataclass of ``pipelines.policy`` itself, validated by its own checks."""
    policy_file: PolicyFileSettings = PolicyFileSettings()
    """``MODSTREAM_POLICY_FILE__PATH=/etc/modstream/policy.toml``: thresholds over ``policy``,
    hot-reloaded like the rule file."""
    rules: RulesSettings = RulesSettings()
    reliability: ReliabilitySettings = ReliabilitySettings()
    rollups: RollupSettings = RollupSettings()
    http: HttpSettings = HttpSettings()
    failpoint: str | None = None
    """Testing only (``MODSTREAM_FAILPOINT=after_pg_commit`` or ``name@N`` for the N-th pass):
    the worker SIGKILLs itself there; ``raise:name@N`` raises an unexpected error there instead;
    see ``engine.failpoints``."""
