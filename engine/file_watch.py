"""Reload a configuration file without a restart: watch its stamp, install what loads cleanly.

The rule file (``engine.rules_watch``) and the policy file (``engine.policy_watch``) are watched
the same way: every ``interval_s`` the file's ``(mtime, size)`` is compared with the last one
seen (``stat`` follows symlinks, so a Kubernetes ConfigMap's ``..data`` swap counts); a change is
loaded off the event loop (heartbeats keep running) and handed to ``install``. A file that fails
to load is rejected: ``on_reject`` is told (a metric), the rejection is logged with the problem,
and what is installed stays as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from common.logs import get_logger

__all__ = ["FileWatcher"]

T = TypeVar("T")

_log = get_logger(__name__)

_Stamp = tuple[int, int]
"""(mtime in ns, size in bytes): a change in either means the file was rewritten."""


def _stamp(path: Path) -> _Stamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class FileWatcher(Generic[T]):
    """Calls ``install(load(path))`` each time ``path`` changes and ``load`` does not raise one
    of ``errors``; ``events`` names the log events (installed, rejected) and ``describe`` adds
    what is worth logging about an installed value."""

    def __init__(
        self,
        path: Path,
        interval_s: float,
        *,
        load: Callable[[Path], T],
        install: Callable[[T], None],
        errors: tuple[type[Exception], ...],
        events: tuple[str, str],
        on_reject: Callable[[Exception], None] | None = None,
        describe: Callable[[T], dict[str, Any]] | None = None,
    ) -> None:
        self._path = path
        self._interval_s = interval_s
        self._load = load
        self._install = install
        self._errors = errors
        self._installed_event, self._rejected_event = events
        self._on_reject = on_reject
        self._describe = describe
        self._stamp = _stamp(path)
        self.reloads = 0
        self.rejections = 0

    async def check(self) -> bool:
        """Reload now if the file changed; ``True`` when a new value was installed."""
        stamp = _stamp(self._path)
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            value = await asyncio.to_thread(self._load, self._path)
        except self._errors as exc:
            self.rejections += 1
            _log.error(self._rejected_event, path=str(self._path), error=str(exc))
            if self._on_reject is not None:
                self._on_reject(exc)
            return False
        self._install(value)
        self.reloads += 1
        details = self._describe(value) if self._describe is not None else {}
        _log.info(self._installed_event, path=str(self._path), **details)
        return True

    async def run(self, done: asyncio.Event) -> None:
        """Poll until ``done`` is set."""
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._interval_s)
            if not done.is_set():
                await self.check()
