"""Failpoints: make the worker fail at a named point, to prove failures lose nothing.

Armed from ``WorkerSettings.failpoint`` (``MODSTREAM_FAILPOINT``), written
``[action:]name[@N]``:

- ``after_pg_commit`` or ``kill:after_pg_commit``: SIGKILL on the first pass of that point;
  ``after_pg_commit@3`` on the third. SIGKILL, not an exception: no ``finally`` block, no flush,
  no goodbye to the group.
- ``raise:during_inference@2``: raise ``FailpointRaised`` on the second pass instead, an
  exception nothing in the pipeline expects, so the worker's own handling of an unexpected error
  (stop loudly, exit non-zero, commit nothing past the failed work) is what gets exercised.

Either action fires once; later passes do nothing. A specification naming an unknown action or
point, or a count that is not a positive integer, raises ``FailpointError``. Unarmed (the
default) every check is one string comparison.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Literal, get_args

from engine.errors import EngineError

__all__ = [
    "FAILPOINT_ACTIONS",
    "FAILPOINT_NAMES",
    "RESCAN_FAILPOINT_NAMES",
    "FailpointAction",
    "FailpointError",
    "FailpointRaised",
    "Failpoints",
]

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

RESCAN_FAILPOINT_NAMES: tuple[str, ...] = ("rescan_after_commit",)
"""Where ``modstream rescan`` checks (armed by the same ``MODSTREAM_FAILPOINT``): a batch's
changed verdicts and checkpoint committed, the verdicts not yet published."""

FailpointAction = Literal["kill", "raise"]
FAILPOINT_ACTIONS: tuple[FailpointAction, ...] = get_args(FailpointAction)
"""What an armed point does when its pass comes: SIGKILL the process, or raise."""


class FailpointError(EngineError, ValueError):
    """The failpoint specification names an unknown action or point, or a bad count."""


class FailpointRaised(EngineError, RuntimeError):
    """Raised by a ``raise:`` failpoint: an unexpected error injected on purpose."""

    def __init__(self, name: str, count: int) -> None:
        super().__init__(f"failpoint {name} raised on pass {count}")
        self.name = name
        self.count = count


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _parse_action(action: str) -> FailpointAction:
    for known in FAILPOINT_ACTIONS:
        if action == known:
            return known
    raise FailpointError(f"unknown failpoint action {action!r}; known: {FAILPOINT_ACTIONS}")


class Failpoints:
    def __init__(
        self,
        spec: str | None,
        *,
        kill: Callable[[], None] = _kill_self,
        names: tuple[str, ...] = FAILPOINT_NAMES,
    ) -> None:
        self._name: str | None = None
        self._action: FailpointAction = "kill"
        self._count = 0
        self._remaining = 0
        self._kill = kill
        if spec:
            action, colon, rest = spec.partition(":")
            if not colon:
                action, rest = "kill", spec
            self._action = _parse_action(action)
            name, _, count = rest.partition("@")
            if name not in names:
                raise FailpointError(f"unknown failpoint {name!r}; known: {names}")
            try:
                self._count = int(count) if count else 1
            except ValueError as exc:
                raise FailpointError(f"failpoint count {count!r} is not an integer") from exc
            if self._count < 1:
                raise FailpointError("failpoint count must be >= 1")
            self._remaining = self._count
            self._name = name

    @property
    def armed(self) -> str | None:
        """The armed point's name, whatever its action (``None`` when unarmed)."""
        return self._name

    @property
    def action(self) -> FailpointAction:
        return self._action

    def hit(self, name: str) -> None:
        """Pass point ``name``; the armed point's N-th pass kills the process or raises
        ``FailpointRaised``."""
        if name != self._name:
            return
        self._remaining -= 1
        if self._remaining != 0:
            return
        if self._action == "raise":
            raise FailpointRaised(name, self._count)
        self._kill()
