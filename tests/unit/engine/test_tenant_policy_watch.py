"""Tests for engine.tenant_policy_watch and the tenant side of engine.policy_stage: one policy
file per tenant, a file that fails refused for its tenant alone (logged without its text), the
other tenants and the default untouched, bounded metrics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from engine.metrics import Metrics
from engine.parts import _tenant_policies
from engine.policy_stage import PolicyStage
from engine.tenant_policy_watch import TenantPolicyWatcher
from pipelines.policy import PolicyThresholds
from pipelines.policy_levels import SHIPPED_LEVELS
from pipelines.tenants import DEFAULT_TENANT
from worker.settings import WorkerSettings

BASE = PolicyThresholds()
_LOW = SHIPPED_LEVELS.categories["offensive"].levels["low"]
_HIGH = SHIPPED_LEVELS.categories["offensive"].levels["high"]
_LOW_FILE = '[levels]\noffensive = "low"\n'
_HIGH_FILE = '[levels]\noffensive = "high"\n'
_SECRET = "do-not-log-this-text"
_BAD_FILE = f'# {_SECRET}\n[levels]\noffensive = "strict"\n'


def _write(path: Path, text: str, bump_s: int = 0) -> None:
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump_s * 1_000_000_000))


def _sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    return float(metrics.registry.get_sample_value(name, labels or {}) or 0.0)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry())


@pytest.fixture
def stage(metrics: Metrics) -> PolicyStage:
    return PolicyStage(BASE, metrics)


def _watcher(folder: Path, stage: PolicyStage, *, max_tenants: int = 10) -> TenantPolicyWatcher:
    return TenantPolicyWatcher(folder, 1.0, stage, BASE, max_tenants=max_tenants)


def test_without_a_file_a_tenant_decides_with_the_default_thresholds(stage: PolicyStage) -> None:
    """``None``, the default tenant and a tenant without a file read the default thresholds."""
    stage.install(PolicyThresholds(flag_hate=0.5))
    for tenant in (None, DEFAULT_TENANT, "nobody"):
        assert stage.thresholds_for(tenant) is stage.thresholds


async def test_each_tenant_gets_its_file_and_a_reload_touches_only_it(
    tmp_path: Path, stage: PolicyStage, metrics: Metrics
) -> None:
    """Two tenants load their own levels; changing one file changes that tenant alone; the
    gauge counts the tenants and the reloads are counted without a tenant label."""
    _write(tmp_path / "acme.toml", _LOW_FILE)
    _write(tmp_path / "kids.toml", _HIGH_FILE)
    watcher = _watcher(tmp_path, stage)
    assert watcher.load_all() == 2
    assert stage.thresholds_for("acme").flag_offensive == _LOW["flag_offensive"]
    assert stage.thresholds_for("kids").flag_offensive == _HIGH["flag_offensive"]
    assert stage.thresholds_for(None) == BASE
    assert _sample(metrics, "modstream_policy_tenants") == 2
    assert _sample(metrics, "modstream_policy_reloads_total", {"result": "installed"}) == 2

    assert await watcher.check() == 0  # nothing changed
    kids = stage.thresholds_for("kids")
    _write(tmp_path / "acme.toml", _HIGH_FILE, bump_s=1)
    assert await watcher.check() == 1
    assert stage.thresholds_for("acme").flag_offensive == _HIGH["flag_offensive"]
    assert stage.thresholds_for("kids") is kids
    assert stage.thresholds == BASE
    assert _sample(metrics, "modstream_policy_reloads_total", {"result": "installed"}) == 3


async def test_a_bad_file_is_refused_logged_without_its_text_and_the_tenant_keeps_its_policy(
    tmp_path: Path, stage: PolicyStage, metrics: Metrics
) -> None:
    """An unknown level is refused for its tenant: counted, logged with the problem (never the
    file's text), the thresholds in use stay; a later good file loads again."""
    path = tmp_path / "acme.toml"
    _write(path, _LOW_FILE)
    watcher = _watcher(tmp_path, stage)
    watcher.load_all()
    _write(path, _BAD_FILE, bump_s=1)
    with capture_logs() as logs:
        assert await watcher.check() == 0
    assert stage.thresholds_for("acme").flag_offensive == _LOW["flag_offensive"]
    assert _sample(metrics, "modstream_policy_reloads_total", {"result": "rejected"}) == 1
    [event] = [e for e in logs if e["event"] == "tenant_policy_reload_rejected"]
    assert event["tenant"] == "acme"
    assert "'strict' is not a level" in event["error"]
    assert _SECRET not in repr(logs)
    assert await watcher.check() == 0  # refused once, not again until it changes
    _write(path, _HIGH_FILE, bump_s=2)
    assert await watcher.check() == 1
    assert stage.thresholds_for("acme").flag_offensive == _HIGH["flag_offensive"]


def test_a_tenant_whose_file_never_loaded_decides_with_the_default(
    tmp_path: Path, stage: PolicyStage, metrics: Metrics
) -> None:
    """At start a refused file leaves its tenant on the default thresholds; the others load."""
    _write(tmp_path / "acme.toml", _BAD_FILE)
    _write(tmp_path / "kids.toml", _HIGH_FILE)
    watcher = _watcher(tmp_path, stage)
    assert watcher.load_all() == 1
    assert stage.thresholds_for("acme") == BASE
    assert watcher.rejections == 1
    assert _sample(metrics, "modstream_policy_tenants") == 1


async def test_a_removed_file_sends_its_tenant_back_to_the_default(
    tmp_path: Path, stage: PolicyStage, metrics: Metrics
) -> None:
    path = tmp_path / "acme.toml"
    _write(path, _LOW_FILE)
    watcher = _watcher(tmp_path, stage)
    watcher.load_all()
    path.unlink()
    assert await watcher.check() == 1
    assert stage.thresholds_for("acme") == BASE
    assert _sample(metrics, "modstream_policy_tenants") == 0


def test_names_that_are_not_tenants_are_refused_or_passed_by(
    tmp_path: Path, stage: PolicyStage
) -> None:
    """``default.toml`` and a bad id are refused (each once); proposals, ``_`` and ``.`` names
    and folders are passed by; files past ``max_tenants`` are refused."""
    for name in ("default.toml", "Bad Name.toml", "notes.txt"):
        _write(tmp_path / name, _LOW_FILE)
    for name in ("acme.proposed.toml", "acme.proposed.report.json", "_shared.toml", ".hid.toml"):
        _write(tmp_path / name, _BAD_FILE)
    (tmp_path / "sub.toml").mkdir()
    for name in ("a1.toml", "a2.toml", "a3.toml"):
        _write(tmp_path / name, _LOW_FILE)
    watcher = _watcher(tmp_path, stage, max_tenants=2)
    with capture_logs() as logs:
        assert watcher.load_all() == 2
        watcher.load_all()
    refused = sorted(
        Path(e["path"]).name for e in logs if e["event"] == "tenant_policy_file_refused"
    )
    assert refused == ["Bad Name.toml", "a3.toml", "default.toml", "notes.txt"]
    assert set(stage.tenants) == {"a1", "a2"}
    assert stage.thresholds_for("default") == BASE


def test_the_settings_build_the_watch_and_load_the_folder(tmp_path: Path) -> None:
    """``policy_file.tenants_dir`` (``MODSTREAM_POLICY_FILE__TENANTS_DIR``) loads at start."""
    _write(tmp_path / "acme.toml", _LOW_FILE)
    settings = WorkerSettings(policy_file={"tenants_dir": tmp_path})  # type: ignore[arg-type]
    stage = PolicyStage(settings.policy)
    watch = _tenant_policies(settings, stage)
    assert watch is not None
    assert stage.thresholds_for("acme").block_offensive == _LOW["block_offensive"]
    assert _tenant_policies(WorkerSettings(), PolicyStage(BASE)) is None


def test_the_environment_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODSTREAM_POLICY_FILE__TENANTS_DIR", str(tmp_path))
    assert WorkerSettings().policy_file.tenants_dir == tmp_path
