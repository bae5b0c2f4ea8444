"""The root of the pure core's errors: input or configuration it refuses, never worth a retry.

``DecodeError`` (a record that can never become a message), ``RuleLoadError`` (a rule file that
cannot be used), ``PolicyConfigError`` (thresholds that cannot work together) and
``ScoreRowError`` (a model row that breaks the contract) are all :class:`PipelineError`: each is
about the data itself, so whoever gets one dead-letters, rejects or reports it, and never retries
the same input.
"""

from __future__ import annotations

__all__ = ["PipelineError"]


class PipelineError(ValueError):
    """Data or configuration the pure pipeline refuses (see the module docstring)."""
