"""The worker's rule watcher under a Kubernetes ConfigMap volume (deploy/k8s): the kubelet
publishes an update by writing a new timestamped folder and swapping the ``..data`` symlink, so
the mounted ``rules.toml`` (a symlink into ``..data``) changes without any write to its path."""

from __future__ import annotations

import os
from pathlib import Path

from engine.rules_watch import RulesWatcher
from pipelines.rules import RuleEngine

_RULES = """
[[rules]]
id = "cm.{name}"
category = "spam"
severity = "low"
action = "flag"
kind = "keywords"
languages = ["en"]
keywords = ["{name}"]
"""


def _publish(volume: Path, version: str, name: str, mtime_s: float) -> None:
    """What the kubelet's atomic writer does: a new folder, then one rename of ``..data``."""
    folder = volume / f"..{version}"
    folder.mkdir()
    (folder / "rules.toml").write_text(_RULES.format(name=name))
    os.utime(folder / "rules.toml", (mtime_s, mtime_s))
    staged = volume / "..data_tmp"
    staged.symlink_to(folder.name)
    os.replace(staged, volume / "..data")
    if not (volume / "rules.toml").is_symlink():
        (volume / "rules.toml").symlink_to("..data/rules.toml")


async def test_a_configmap_update_is_installed_without_a_restart(tmp_path: Path) -> None:
    """After the ``..data`` swap the watcher installs the new rules; an unchanged volume is
    not reloaded."""
    _publish(tmp_path, "2026_12_04_10_00_00.1", "alpha", 1_000.0)
    installed: list[RuleEngine] = []
    watcher = RulesWatcher(tmp_path / "rules.toml", 1.0, installed.append)
    assert not await watcher.check()
    _publish(tmp_path, "2026_12_04_10_05_00.2", "bravo", 1_300.0)
    assert await watcher.check()
    assert [r.meta.id for r in installed[-1].ruleset.rules] == ["cm.bravo"]
    assert not await watcher.check()
