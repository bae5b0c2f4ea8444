"""Reload the policy file without a restart (``policy_file.path``), like the rule file.

The file (``pipelines.policy_file``: a ``[levels]`` table of strictness levels and a
``[thresholds]`` table of ``PolicyThresholds`` fields) is read over the thresholds the service
was configured with, so a key it leaves out keeps that value. A file that does not load (bad
TOML, an unknown key or level, a threshold out of range or above its block threshold) is
rejected with a ``policy_reload_rejected`` log naming the problem and
``modstream_policy_reloads_total{result="rejected"}``; the thresholds in use stay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.file_watch import FileWatcher
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import PolicyFileError, load_policy_file

__all__ = ["PolicyWatcher"]


class PolicyWatcher(FileWatcher[PolicyThresholds]):
    """Calls ``install(thresholds)`` each time ``path`` changes and loads over ``base``."""

    def __init__(
        self,
        path: Path,
        interval_s: float,
        base: PolicyThresholds,
        install: Callable[[PolicyThresholds], None],
        on_reject: Callable[[Exception], None] | None = None,
    ) -> None:
        def load(file: Path) -> PolicyThresholds:
            return load_policy_file(file, base)

        super().__init__(
            path,
            interval_s,
            load=load,
            install=install,
            errors=(PolicyFileError,),
            events=("policy_reloaded", "policy_reload_rejected"),
            on_reject=on_reject,
            describe=_describe,
        )


def _describe(thresholds: PolicyThresholds) -> dict[str, Any]:
    return dataclasses.asdict(thresholds)
