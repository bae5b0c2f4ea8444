"""Tests for engine.rules_watch: a changed rule file is installed; a broken one is rejected."""

from __future__ import annotations

import os
from pathlib import Path

from engine.rules_watch import RulesWatcher
from pipelines.rules import RuleEngine

_GOOD = """
[[rules]]
id = "t.one"
category = "spam"
severity = "low"
action = "flag"
kind = "keywords"
languages = ["en"]
keywords = ["alpha"]
"""

_BACKREF = """
[[rules]]
id = "t.backref"
category = "spam"
severity = "low"
action = "flag"
kind = "regex"
languages = ["en"]
patterns = ['''(ab)\\1''']
"""


def _write(path: Path, text: str, bump_ns: int) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump_ns))


async def test_changed_file_installs_a_new_engine(tmp_path: Path) -> None:
    """After the file changes, ``check`` builds and installs an engine with the new rules."""
    path = tmp_path / "rules.toml"
    _write(path, _GOOD, 0)
    installed: list[RuleEngine] = []
    watcher = RulesWatcher(path, 1.0, installed.append)
    assert not await watcher.check()  # unchanged since construction
    _write(path, _GOOD.replace("t.one", "t.two"), 1_000_000_000)
    assert await watcher.check()
    assert [r.meta.id for r in installed[-1].ruleset.rules] == ["t.two"]
    assert watcher.reloads == 1


async def test_broken_file_is_rejected_and_old_engine_kept(tmp_path: Path) -> None:
    """A rule RE2 cannot compile is rejected: nothing is installed and a rejection is counted."""
    path = tmp_path / "rules.toml"
    _write(path, _GOOD, 0)
    installed: list[RuleEngine] = []
    watcher = RulesWatcher(path, 1.0, installed.append)
    _write(path, _GOOD + _BACKREF, 1_000_000_000)
    assert not await watcher.check()
    assert installed == []
    assert watcher.rejections == 1


async def test_missing_file_is_ignored(tmp_path: Path) -> None:
    """A rule file that disappears (mid-rename) changes nothing."""
    path = tmp_path / "rules.toml"
    _write(path, _GOOD, 0)
    installed: list[RuleEngine] = []
    watcher = RulesWatcher(path, 1.0, installed.append)
    path.unlink()
    assert not await watcher.check()
    assert installed == []


async def test_invalid_utf8_is_rejected_and_old_engine_kept(tmp_path: Path) -> None:
    """A rule file with bytes that are not UTF-8 is a rejected reload, not a crash."""
    path = tmp_path / "rules.toml"
    _write(path, _GOOD, 0)
    installed: list[RuleEngine] = []
    watcher = RulesWatcher(path, 1.0, installed.append)
    path.write_bytes(_GOOD.replace("alpha", "al\xffpha").encode("latin-1") + b"\xc3\x28")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert not await watcher.check()
    assert installed == []
    assert watcher.rejections == 1
