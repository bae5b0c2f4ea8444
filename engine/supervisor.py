"""Task supervision: one ``TaskGroup`` per service, a drain deadline, and bounded stop steps.

:meth:`Supervisor.run` runs a service's *pipeline* tasks (they end by themselves after ``stop``)
and its *background* loops (they end at ``done``) in one ``TaskGroup``, so no exception goes
unobserved. The first unexpected one is recorded (:attr:`Supervisor.failure`: readiness turns
false and the consume loop stops fetching at once), logged with the exception's type and where it
was raised, never its message, and the group cancels the rest and raises.

Stopping (arq-style): after ``stop`` the pipeline gets ``drain_timeout_s``; then ``give_up`` is
set, so work blocked on a dependency that is down can abandon; what is still blocked a moment
later is cancelled. Cancelling loses nothing: what is not durable is not committed and is read
again, and stored verdicts not yet published are left to the outbox relay, as after a SIGKILL.
Background loops stuck on a dependency once the pipeline is done are cancelled too.

:func:`stop_within` is one bounded shutdown step (a client waiting on a broker that is down
would otherwise hold the process long after the drain deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from common.logs import get_logger

__all__ = ["Loop", "Supervisor", "stop_within"]

_log = get_logger(__name__)

Loop = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
"""A background loop: runs until the event it is given is set."""

GIVE_UP_GRACE_S = 0.25
"""After the drain deadline, how long blocked work gets to notice ``give_up`` before it is
cancelled."""
BACKGROUND_STOP_S = 0.5
"""After the pipeline is done, how long background loops get to see ``done``."""


async def stop_within(step: str, stop: Callable[[], Awaitable[None]], timeout_s: float) -> None:
    """One shutdown step, abandoned after ``timeout_s``. A step that fails, including with a
    ``CancelledError`` of its own (aiokafka's consumer re-raises its cancelled fetch task's), is
    logged and the shutdown goes on; a cancellation of this task itself still propagates."""
    try:
        async with asyncio.timeout(timeout_s):
            await stop()
    except TimeoutError:
        _log.warning("shutdown_step_timed_out", step=step, timeout_s=timeout_s)
    except asyncio.CancelledError as exc:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        _log.warning("shutdown_step_failed", step=step, error_type=type(exc).__name__)
    except Exception as exc:
        _log.warning("shutdown_step_failed", step=step, error_type=type(exc).__name__)


def _first_leaf(group: ExceptionGroup[Exception]) -> Exception:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, ExceptionGroup) else first


def raised_at(exc: BaseException) -> str:
    """``file.py:line in function`` of the innermost frame: where, without the message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


class Supervisor:
    """Runs one service's tasks; ``in_flight`` (records not yet durable) is only logged, and
    ``service`` names the failure event of a task (``worker_task_failed``)."""

    def __init__(
        self,
        give_up: asyncio.Event,
        drain_timeout_s: float,
        in_flight: Callable[[], int],
        *,
        service: str = "worker",
    ) -> None:
        self._task_failed = f"{service}_task_failed"
        self.give_up = give_up
        self._drain_timeout_s = drain_timeout_s
        self._in_flight = in_flight
        self.failure: str | None = None
        """``event: ErrorType`` of the first unexpected failure (``None`` while healthy)."""

    def fail(self, event: str, exc: Exception, **fields: object) -> None:
        """Record an unexpected exception: every one is logged (type and place only); the
        first one names the failure."""
        if self.failure is None:
            self.failure = f"{event}: {type(exc).__name__}"
        _log.error(event, error_type=type(exc).__name__, raised_at=raised_at(exc), **fields)

    def batch_failed(self, kind: str, exc: Exception, items: int) -> None:
        """A dispatcher's batch task raised (``engine.dispatch``'s ``on_failure``)."""
        self.fail("batch_task_failed", exc, kind=kind, items=items)

    async def run(
        self,
        stop: asyncio.Event,
        pipeline: Mapping[str, Coroutine[Any, Any, None]],
        background: Mapping[str, Loop],
    ) -> None:
        """Run until the pipeline ends (after ``stop``) or a task fails (then the group
        raises an ``ExceptionGroup``)."""
        done = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            running = [tg.create_task(self._watched(name, work)) for name, work in pipeline.items()]
            loops = [
                tg.create_task(self._watched(name, loop(done))) for name, loop in background.items()
            ]
            tg.create_task(self._watched("drain_deadline", self._drain(stop, done, running)))
            await asyncio.wait(running)
            done.set()
            # Loops stop at ``done``, unless one is blocked on a dependency that is down (the
            # outbox relay publishing to an absent broker): cancel those. What they leave
            # unpublished stays in the outbox for the next start.
            _, stuck = await asyncio.wait(loops, timeout=BACKGROUND_STOP_S) if loops else ((), ())
            if stuck:
                _log.warning("background_tasks_cancelled", tasks=len(stuck))
                for task in stuck:
                    task.cancel()

    async def _watched(self, task: str, work: Awaitable[None]) -> None:
        """Await a task; an unexpected exception is recorded, then re-raised so the
        ``TaskGroup`` cancels the rest."""
        try:
            await work
        except ExceptionGroup as group:
            # A dispatcher's: its batch failures were recorded where they happened.
            if self.failure is None:
                self.fail(self._task_failed, _first_leaf(group), task=task)
            raise
        except Exception as exc:
            self.fail(self._task_failed, exc, task=task)
            raise

    async def _drain(
        self, stop: asyncio.Event, done: asyncio.Event, pipeline: list[asyncio.Task[None]]
    ) -> None:
        """After ``stop``, give the pipeline ``drain_timeout_s``, then let blocked work give
        up; what is still blocked a moment later is cancelled (see the module docstring)."""
        stop_task = asyncio.ensure_future(stop.wait())
        done_task = asyncio.ensure_future(done.wait())
        try:
            await asyncio.wait({stop_task, done_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Also when cancelled (another task failed): leave no waiter pending.
            stop_task.cancel()
            done_task.cancel()
        if done.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), self._drain_timeout_s)
        if not done.is_set():
            _log.warning("drain_deadline_passed")
        self.give_up.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), GIVE_UP_GRACE_S)
        if done.is_set():
            return
        _log.warning("blocked_batches_cancelled", in_flight=self._in_flight())
        for task in pipeline:
            task.cancel()
