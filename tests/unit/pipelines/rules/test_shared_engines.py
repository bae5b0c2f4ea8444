"""Tests for pipelines.rules.shared_engines and tenant ids: one engine per distinct rule set,
bounded; tenant file names checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.rules import RuleEngine, RuleSet
from pipelines.rules.layers import RuleStack, load_rule_stack
from pipelines.rules.shared_engines import EngineLimitError, EngineShelf, resident_bytes
from pipelines.rules.tenants import TenantIdError, check_tenant_id, tenant_of_file
from tests.unit.pipelines.rules.layer_files import BASE, LAYER, write


def test_equal_stacks_share_one_engine(tmp_path: Path) -> None:
    """Tenants whose files make the same rules get the same engine, built once."""
    write(tmp_path, "base.toml", BASE)
    built: list[RuleSet] = []

    def build(stack: RuleStack, base: RuleEngine | None) -> RuleEngine:
        built.append(stack.ruleset)
        return RuleEngine(stack.ruleset, base=base)

    shelf = EngineShelf(4, build)
    first, new_first = shelf.engine_for(load_rule_stack(write(tmp_path, "a.toml", LAYER)))
    second, new_second = shelf.engine_for(load_rule_stack(write(tmp_path, "b.toml", LAYER + "#")))
    assert (new_first, new_second) == (True, False)
    assert first.engine is second.engine
    assert len(built) == 1
    assert len(shelf) == 1
    assert first.stack == "base.toml > a.toml"
    assert first.build_s > 0
    assert first.rss_mb >= 0


def test_the_shelf_is_bounded_and_forgets_unused_engines(tmp_path: Path) -> None:
    """A stack past ``max_engines`` is refused; ``keep_only`` makes room again."""
    shelf = EngineShelf(1)
    _base, _ = shelf.engine_for(load_rule_stack(write(tmp_path, "base.toml", BASE)))
    layered = load_rule_stack(write(tmp_path, "a.toml", LAYER))
    with pytest.raises(EngineLimitError, match="distinct stack number 2; at most 1"):
        shelf.engine_for(layered)
    assert shelf.keep_only([]) == 1
    assert shelf.engine_for(layered)[1]
    assert shelf.keep_only([shelf.built()[0].engine]) == 0


def test_a_default_engine_added_is_shared(tmp_path: Path) -> None:
    """An engine built elsewhere (the default stack's) serves an equal stack."""
    stack = load_rule_stack(write(tmp_path, "base.toml", BASE))
    engine = RuleEngine(stack.ruleset)
    shelf = EngineShelf(2)
    shelf.add(engine)
    assert shelf.engine_for(stack) == (shelf.built()[0], False)
    assert shelf.built()[0].engine is engine


def test_resident_bytes_reads_this_process() -> None:
    assert resident_bytes() > 1 << 20


@pytest.mark.parametrize("name", ["acme", "a", "team-7_eu", "0" * 64])
def test_tenant_ids(name: str) -> None:
    assert check_tenant_id(name) == name
    assert tenant_of_file(f"{name}.toml") == name


@pytest.mark.parametrize(
    "file_name",
    [
        "Acme.toml",
        "acme corp.toml",
        "_shared.toml",
        ".toml",
        "a" * 65 + ".toml",
        "acme.yaml",
        "acme",
        "../acme.toml",
        "acmé.toml",
    ],
)
def test_bad_tenant_file_names_are_refused(file_name: str) -> None:
    with pytest.raises(TenantIdError, match="tenant"):
        tenant_of_file(file_name)
