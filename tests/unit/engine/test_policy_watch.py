"""Tests for engine.policy_watch and engine.policy_stage: a changed policy file is installed;
a bad one is refused, counted, and the thresholds in use stay."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry

from engine.metrics import Metrics
from engine.policy_stage import PolicyStage
from engine.policy_watch import PolicyWatcher
from pipelines.policy import PolicyThresholds

BASE = PolicyThresholds()


def _write(path: Path, text: str, bump_ns: int) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump_ns))


def _rig(path: Path) -> tuple[PolicyStage, PolicyWatcher, Metrics]:
    metrics = Metrics(CollectorRegistry())
    stage = PolicyStage(BASE, metrics)
    watcher = PolicyWatcher(path, 1.0, BASE, stage.install, on_reject=stage.reject)
    return stage, watcher, metrics


def _sample(metrics: Metrics, name: str, labels: dict[str, str]) -> float:
    return float(metrics.registry.get_sample_value(name, labels) or 0.0)


async def test_a_changed_file_is_installed_and_exported(tmp_path: Path) -> None:
    """After the file changes the stage decides with its thresholds (keys left out keep the
    base), the reload is counted and the gauge shows the new value."""
    path = tmp_path / "policy.toml"
    _write(path, "[thresholds]\nflag_hate = 0.5\n", 0)
    stage, watcher, metrics = _rig(path)
    assert not await watcher.check()  # unchanged since construction
    flag_hate = {"threshold": "flag_hate"}
    assert _sample(metrics, "modstream_policy_threshold", flag_hate) == BASE.flag_hate
    _write(path, "[thresholds]\nflag_hate = 0.42\n", 1_000_000_000)
    assert await watcher.check()
    assert stage.thresholds.flag_hate == 0.42
    assert stage.thresholds.block_hate == BASE.block_hate
    assert _sample(metrics, "modstream_policy_reloads_total", {"result": "installed"}) == 1
    assert _sample(metrics, "modstream_policy_threshold", flag_hate) == 0.42


async def test_a_bad_file_is_refused_and_the_thresholds_in_use_stay(tmp_path: Path) -> None:
    """A threshold above its block threshold is refused: nothing installed, one rejection
    counted; a later good file is installed again."""
    path = tmp_path / "policy.toml"
    _write(path, "[thresholds]\nflag_hate = 0.5\n", 0)
    stage, watcher, metrics = _rig(path)
    _write(path, "[thresholds]\nflag_hate = 0.99\n", 1_000_000_000)
    assert not await watcher.check()
    assert stage.thresholds == BASE
    assert watcher.rejections == 1
    assert _sample(metrics, "modstream_policy_reloads_total", {"result": "rejected"}) == 1
    _write(path, "[thresholds]\nflag_hate = 0.55\n", 2_000_000_000)
    assert await watcher.check()
    assert stage.thresholds.flag_hate == 0.55
