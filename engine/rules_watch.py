"""Reload the rule file without a restart: watch its mtime, swap the engine when it parses.

The file may be a layer over another (``pipelines.rules.layers``; only the file itself is watched,
not those it extends). A new file that fails to load (bad TOML, a regex RE2 cannot compile, a
duplicate id, a layer's unknown rule id) is rejected
with a ``rules_reload_rejected`` log naming the problem, and the running engine stays as it was.
The file is read and compiled off the event loop, so heartbeats keep running
(``engine.file_watch``, shared with the policy file's watch).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.file_watch import FileWatcher
from pipelines.rules import RuleEngine, RuleLoadError
from pipelines.rules.layers import load_rule_stack

__all__ = ["RulesWatcher"]


def _build(path: Path) -> RuleEngine:
    return RuleEngine(load_rule_stack(path).ruleset)


def _describe(engine: RuleEngine) -> dict[str, Any]:
    return {"rules": len(engine.ruleset.enabled)}


class RulesWatcher(FileWatcher[RuleEngine]):
    """Calls ``install(engine)`` each time ``path`` changes and the new file loads cleanly."""

    def __init__(
        self,
        path: Path,
        interval_s: float,
        install: Callable[[RuleEngine], None],
        on_reject: Callable[[Exception], None] | None = None,
    ) -> None:
        super().__init__(
            path,
            interval_s,
            load=_build,
            install=install,
            errors=(RuleLoadError,),
            events=("rules_reloaded", "rules_reload_rejected"),
            on_reject=on_reject,
            describe=_describe,
        )
