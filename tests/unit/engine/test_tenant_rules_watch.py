"""Tests for engine.tenant_rules_watch and the tenant side of engine.rule_stage: one rule file
per tenant, engines shared by equal stacks, a file that fails refused per tenant."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.metrics import Metrics
from engine.parts import _tenant_rules
from engine.rule_stage import RuleStage
from engine.settings import RulesSettings
from engine.tenant_rules_watch import TenantRulesWatcher
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset, parse_ruleset
from pipelines.rules.shared_engines import EngineShelf
from pipelines.tenants import DEFAULT_TENANT
from tests.unit.pipelines.rules.layer_files import BASE, LAYER, write

_SENT_AT = datetime(2026, 5, 1, tzinfo=UTC)
_LAYER = LAYER.replace('"base.toml"', '"_base.toml"')


def _hits(stage: RuleStage, text: str, tenant: str | None) -> set[str]:
    message = ChatMessage("m", "g", "u", text, _SENT_AT, {}, tenant or DEFAULT_TENANT)
    return {hit.rule_id for hit in stage.evaluate(message)[0].hits}


def _touch(path: Path, text: str, bump_s: int) -> None:
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump_s * 1_000_000_000))


@pytest.fixture
def stage() -> RuleStage:
    return RuleStage(RuleEngine(parse_ruleset(BASE)), Metrics())


def _watcher(
    folder: Path, stage: RuleStage, *, max_tenants: int = 10, max_stacks: int = 4
) -> TenantRulesWatcher:
    shelf = EngineShelf(max_stacks)
    shelf.add(stage.engine)
    return TenantRulesWatcher(folder, 1.0, stage, shelf, max_tenants=max_tenants)


def test_without_a_tenant_the_default_rules_apply(stage: RuleStage) -> None:
    """The stage's API takes a tenant; ``None`` and unknown tenants use the default engine."""
    assert _hits(stage, "cheap pills", None) == {"t.spam.words"}
    assert _hits(stage, "cheap pills", "nobody") == {"t.spam.words"}
    assert stage.engine_for("nobody") is stage.engine
    assert stage.engines() == [stage.engine]


async def test_tenants_get_their_stack_and_share_engines(stage: RuleStage, tmp_path: Path) -> None:
    """Two tenants with equal stacks share one engine; a tenant extending the default-equal
    base shares the default's; the same text gets different verdicts per tenant."""
    write(tmp_path, "_base.toml", BASE)
    write(tmp_path, "acme.toml", _LAYER)
    write(tmp_path, "globex.toml", _LAYER + "\n# globex's copy\n")
    write(tmp_path, "initech.toml", 'extends = "_base.toml"')
    watcher = _watcher(tmp_path, stage)
    assert watcher.load_all() == 3
    assert stage.engine_for("acme") is stage.engine_for("globex")
    assert stage.engine_for("initech") is stage.engine
    assert len(stage.engines()) == 2
    assert _hits(stage, "cheap pills", None) == {"t.spam.words"}
    assert _hits(stage, "cheap pills", "acme") == set()
    assert _hits(stage, "see bit.ly/x", "acme") == {"acme.links"}
    assert not await watcher.check()  # nothing changed


async def test_a_broken_file_is_refused_for_its_tenant_alone(
    stage: RuleStage, tmp_path: Path
) -> None:
    """A tenant file that fails keeps that tenant's rules in use; the others load and
    reload; fixing it (or the file it extends) installs it."""
    write(tmp_path, "_base.toml", BASE)
    acme = write(tmp_path, "acme.toml", _LAYER)
    broken = write(tmp_path, "globex.toml", 'extends = "_base.toml"\ndisable = ["t.nope"]')
    watcher = _watcher(tmp_path, stage)
    watcher.load_all()
    assert watcher.rejections == 1
    assert stage.engine_for("globex") is stage.engine  # never loaded: the default
    acme_engine = stage.engine_for("acme")
    _touch(acme, _LAYER.replace('action = "block"', 'action = "nuke"'), 5)
    assert not await watcher.check()
    assert stage.engine_for("acme") is acme_engine  # the rules in use stay
    assert watcher.rejections == 2
    _touch(broken, 'extends = "_base.toml"\ndisable = ["t.spam.words"]', 5)
    assert await watcher.check() == 1
    assert _hits(stage, "cheap pills", "globex") == set()


async def test_a_change_below_reloads_the_tenants_above(stage: RuleStage, tmp_path: Path) -> None:
    """Editing a shared layer reloads every tenant that extends it."""
    shared = write(tmp_path, "_base.toml", BASE)
    write(tmp_path, "acme.toml", 'extends = "_base.toml"')
    watcher = _watcher(tmp_path, stage)
    watcher.load_all()
    assert _hits(stage, "cheap pills", "acme") == {"t.spam.words"}
    _touch(shared, BASE.replace('"cheap pills", ', ""), 5)
    assert await watcher.check() == 1
    assert _hits(stage, "cheap pills", "acme") == set()
    assert _hits(stage, "cheap pills", None) == {"t.spam.words"}


async def test_a_removed_file_sends_its_tenant_to_the_default(
    stage: RuleStage, tmp_path: Path
) -> None:
    write(tmp_path, "_base.toml", BASE)
    acme = write(tmp_path, "acme.toml", _LAYER)
    watcher = _watcher(tmp_path, stage)
    watcher.load_all()
    acme.unlink()
    assert await watcher.check() == 1
    assert stage.engine_for("acme") is stage.engine
    assert stage.engines() == [stage.engine]


def test_bad_names_and_bounds_are_refused(stage: RuleStage, tmp_path: Path) -> None:
    """A file name that is no tenant id is refused (once); files past ``max_tenants`` and
    stacks past ``max_stacks`` too; dot files and folders are skipped."""
    write(tmp_path, "_base.toml", BASE)
    write(tmp_path, "Acme Corp.toml", _LAYER)
    write(tmp_path, ".hidden.toml", _LAYER)
    (tmp_path / "..data").mkdir()
    for tenant, rule in (("a", "t.spam.words"), ("b", "t.threat.words"), ("c", "t.spam.words")):
        write(tmp_path, f"{tenant}.toml", f'extends = "_base.toml"\ndisable = ["{rule}"]')
    watcher = _watcher(tmp_path, stage, max_tenants=2, max_stacks=2)
    assert watcher.load_all() == 1  # a; b would be a third engine; c is past max_tenants
    assert set(stage.tenants) == {"a"}
    assert watcher.rejections == 3
    watcher.load_all()
    assert watcher.rejections == 3  # a refused name is reported once


def test_the_builder_loads_the_folder_over_the_default_engine(tmp_path: Path) -> None:
    """``rules.tenants_dir`` wires a watcher whose tenants over the shipped set reuse the
    default engine's matchers; without it there is none and nothing changes."""
    stage = RuleStage(RuleEngine(default_ruleset()), Metrics())
    assert _tenant_rules(RulesSettings(), stage) is None
    write(tmp_path, "acme.toml", 'extends = "default"\ndisable = ["en.hate.slur"]')
    watcher = _tenant_rules(RulesSettings(tenants_dir=tmp_path), stage)
    assert watcher is not None
    assert stage.engine_for("acme").is_layered
    assert _hits(stage, "faggot", "acme") == set()
    assert _hits(stage, "faggot", None) == {"en.hate.slur"}
