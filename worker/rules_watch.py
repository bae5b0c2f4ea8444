"""Reload the rule file without a restart: watch its mtime, swap the engine when it parses.

A new file that fails to load (bad TOML, a regex RE2 cannot compile, a duplicate id) is rejected
with a ``rules_reload_rejected`` log naming the problem, and the running engine stays as it was.
The file is read and compiled off the event loop, so heartbeats keep running.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from common.logs import get_logger
from pipelines.rules import RuleEngine, RuleLoadError, load_ruleset

__all__ = ["RulesWatcher"]

_log = get_logger(__name__)

_Stamp = tuple[int, int]
"""(mtime in ns, size in bytes): a change in either means the file was rewritten."""


def _stamp(path: Path) -> _Stamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _build(path: Path) -> RuleEngine:
    return RuleEngine(load_ruleset(path))


class RulesWatcher:
    """Calls ``install(engine)`` each time ``path`` changes and the new file loads cleanly."""

    def __init__(
        self,
        path: Path,
        interval_s: float,
        install: Callable[[RuleEngine], None],
        on_reject: Callable[[RuleLoadError], None] | None = None,
    ) -> None:
        self._path = path
        self._interval_s = interval_s
        self._install = install
        self._on_reject = on_reject
        self._stamp = _stamp(path)
        self.reloads = 0
        self.rejections = 0

    async def check(self) -> bool:
        """Reload now if the file changed; ``True`` when a new engine was installed."""
        stamp = _stamp(self._path)
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            engine = await asyncio.to_thread(_build, self._path)
        except RuleLoadError as exc:
            self.rejections += 1
            _log.error("rules_reload_rejected", path=str(self._path), error=str(exc))
            if self._on_reject is not None:
                self._on_reject(exc)
            return False
        self._install(engine)
        self.reloads += 1
        _log.info("rules_reloaded", path=str(self._path), rules=len(engine.ruleset.enabled))
        return True

    async def run(self, done: asyncio.Event) -> None:
        """Poll until ``done`` is set."""
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._interval_s)
            if not done.is_set():
                await self.check()
