"""Failpoints: make the worker SIGKILL itself at a named point, to prove crashes lose nothing.

Armed from ``Settings.failpoint`` (``MODSTREAM_FAILPOINT``): ``after_pg_commit`` kills on the
first pass, ``after_pg_commit@3`` on the third. Unarmed (the default) every check is one string
comparison. SIGKILL, not an exception: no ``finally`` block, no flush, no goodbye to the group.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

__all__ = ["FAILPOINT_NAMES", "FailpointError", "Failpoints"]

FAILPOINT_NAMES: tuple[str, ...] = (
    "after_fetch",
    "after_rules",
    "during_inference",
    "after_pg_commit",
    "during_publish",
)
"""Where the pipeline checks: a fetch returned records; a record's rules ran; an inference call
is on the wire; the verdict transaction committed but Kafka offsets are not; verdicts were sent
to Kafka but not yet marked published."""


class FailpointError(ValueError):
    """The failpoint specification names an unknown point or a bad count."""


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Failpoints:
    def __init__(self, spec: str | None, *, kill: Callable[[], None] = _kill_self) -> None:
        self._name: str | None = None
        self._remaining = 0
        self._kill = kill
        if spec:
            name, _, count = spec.partition("@")
            if name not in FAILPOINT_NAMES:
                raise FailpointError(f"unknown failpoint {name!r}; known: {FAILPOINT_NAMES}")
            try:
                self._remaining = int(count) if count else 1
            except ValueError as exc:
                raise FailpointError(f"failpoint count {count!r} is not an integer") from exc
            if self._remaining < 1:
                raise FailpointError("failpoint count must be >= 1")
            self._name = name

    @property
    def armed(self) -> str | None:
        return self._name

    def hit(self, name: str) -> None:
        """Pass point ``name``; the armed point's N-th pass kills the process."""
        if name != self._name:
            return
        self._remaining -= 1
        if self._remaining == 0:
            self._kill()
