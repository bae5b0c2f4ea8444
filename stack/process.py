"""Processes the stack starts: pid files, identity checks, spawning, stopping, health waits.

A service is "ours" only when its pid file names a live process whose command line contains the
service's marker (a path inside the stack's state folder). ``stop`` never signals anything else,
so a stale pid file that the kernel has since reused for another program is harmless.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stack.errors import PortInUseError, ServiceStartError

__all__ = [
    "PidFile",
    "children_of",
    "cmdline",
    "exit_description",
    "group_members",
    "is_alive",
    "locked",
    "owns",
    "port_is_open",
    "spawn",
    "terminate",
    "wait_until",
]

_POLL_INTERVAL_S = 0.2
_CHILD_GRACE_S = 10.0
_KILL_WAIT_S = 10.0
_EXEC_SETTLE_S = 5.0
"""How long an empty ``/proc/<pid>/cmdline`` of a live user process is re-read: it is empty
while the process is inside ``execve`` (new memory, argument pages not yet set up), a window
that a loaded machine stretches to many milliseconds right after ``Popen`` returns."""
_EXEC_SETTLE_POLL_S = 0.01
_PF_KTHREAD = 0x00200000
"""``/proc/<pid>/stat`` flag of kernel threads, whose command line is always empty."""
_children: dict[int, subprocess.Popen[bytes]] = {}
"""Processes spawned by this interpreter, kept so they can be reaped (no zombies in tests)."""
_spawned_argv: dict[int, tuple[str, ...]] = {}
"""The argument vector each running child of ``_children`` was started with."""
_exit_codes: dict[int, int] = {}
"""Return codes of reaped children, for error messages."""


@dataclass(frozen=True, slots=True)
class PidFile:
    """A text file holding one process id."""

    path: Path

    def read(self) -> int | None:
        """The recorded pid, or ``None`` when the file is missing or unreadable."""
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def write(self, pid: int) -> None:
        """Record ``pid`` atomically (write a temporary file, then rename)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(f"{pid}\n", encoding="ascii")
        tmp.replace(self.path)

    def remove(self) -> None:
        """Delete the file; missing is fine."""
        self.path.unlink(missing_ok=True)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if needed) for the block, so two
    ``stack up`` runs at once cannot both start the same service. Not re-entrant."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]
        _spawned_argv.pop(pid, None)
        _exit_codes[pid] = child.returncode


def exit_description(pid: int) -> str:
    """How a process this interpreter spawned ended (" (exit status 1)", " (killed by SIGKILL)"),
    or an empty string when unknown (not our child, or still running)."""
    _reap(pid)
    code = _exit_codes.get(pid)
    if code is None:
        return ""
    if code < 0:
        return f" (killed by {signal.Signals(-code).name})"
    return f" (exit status {code})"


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name (state, parent pid, process group, ...);
    None when it cannot be read (gone, or not ours to see)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split() if ")" in stat else []


def _proc_stats() -> Iterator[tuple[int, list[str]]]:
    """``(pid, fields)`` of every readable process in ``/proc`` (fields as :func:`_stat_fields`)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                yield int(entry.name), fields


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` according to ``/proc`` (e.g. Triton's backend stubs)."""
    return [child for child, fields in _proc_stats() if len(fields) > 1 and fields[1] == str(pid)]


def is_alive(pid: int) -> bool:
    """Whether ``pid`` names a running (not zombie) process."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    if fields is None:
        return False
    return (fields[0] if fields else "?") not in ("Z", "X")


def _read_cmdline(pid: int) -> tuple[str, ...]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(part.decode("utf-8", errors="replace") for part in raw.split(b"\0") if part)


def _is_user_process(pid: int) -> bool:
    """Alive, not a zombie and not a kernel thread: a process that has (or gets) an argv."""
    if not is_alive(pid):
        return False
    fields = _stat_fields(pid) or []
    return len(fields) > 6 and fields[6].isdigit() and not int(fields[6]) & _PF_KTHREAD


def cmdline(pid: int) -> tuple[str, ...]:
    """The argument vector of ``pid`` from ``/proc``, empty when it cannot be read.

    A live user process in the middle of ``execve`` shows an empty command line for a moment;
    that is read again (up to ``_EXEC_SETTLE_S``) instead of being taken as the answer.
    """
    args = _read_cmdline(pid)
    deadline = time.monotonic() + _EXEC_SETTLE_S
    while not args and time.monotonic() < deadline and _is_user_process(pid):
        time.sleep(_EXEC_SETTLE_POLL_S)
        args = _read_cmdline(pid)
    return args


def owns(pid: int | None, marker: str) -> bool:
    """Whether ``pid`` is alive and its command line mentions ``marker`` (so it is ours).

    A running child of this interpreter is judged by the argv it was spawned with: its pid
    cannot have been reused (it is not reaped yet), and ``/proc`` may not show the argv yet.
    """
    if pid is None or not is_alive(pid):
        return False
    spawned_with = _spawned_argv.get(pid)
    if spawned_with is not None:
        return any(marker in part for part in spawned_with)
    return any(marker in part for part in cmdline(pid))


def port_is_open(port: int, host: str = "127.0.0.1", timeout_s: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ports: Sequence[int] = (),
    host: str = "127.0.0.1",
) -> int:
    """Start ``argv`` detached (own session), stdout and stderr appended to ``log_path``.

    Refuses with :class:`PortInUseError` when one of ``ports`` is already taken on ``host``,
    since the new process would fail to bind and something else would answer the health checks.
    """
    for port in ports:
        if port_is_open(port, host):
            raise PortInUseError(f"port {port} on {host} is already in use by another process")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        try:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise ServiceStartError(f"cannot run {argv[0]}: {exc}") from exc
    _children[child.pid] = child
    _spawned_argv[child.pid] = tuple(argv)
    _exit_codes.pop(child.pid, None)  # a reused pid: forget the earlier process's status
    return child.pid


def terminate(
    pid: int, marker: str, *, stop_signal: int = signal.SIGTERM, timeout_s: float = 30.0
) -> bool:
    """Stop ``pid`` if it is ours: ``stop_signal``, then SIGKILL after ``timeout_s``.

    Returns ``True`` when a process of ours was stopped, ``False`` when there was none (dead,
    or alive but not ours: that one is left alone).
    """
    if not owns(pid, marker):
        return False
    children = children_of(pid)
    _signal_and_wait(pid, stop_signal, timeout_s)
    # Helpers that outlive the parent briefly (Triton's Python-backend stubs): the children
    # seen before the signal, and every process still in the service's process group, which
    # also catches a stub started after that snapshot (a stop during model loading). spawn()
    # makes the service a group leader, and the kernel does not reuse a pid that is still a
    # group id, so every member is ours.
    leftovers = sorted(set(children) | set(group_members(pid)))
    _wait_gone(leftovers, _CHILD_GRACE_S)
    return True


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is ``pgid``, from ``/proc``."""
    return [
        member
        for member, fields in _proc_stats()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X")
    ]


def _wait_gone(pids: Sequence[int], grace_s: float) -> None:
    """Wait up to ``grace_s`` for all of ``pids`` to exit, then SIGKILL the rest and wait."""
    for kill, wait_s in ((False, grace_s), (True, _KILL_WAIT_S)):
        remaining = [pid for pid in pids if is_alive(pid)]
        if not remaining:
            return
        for pid in remaining if kill else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(is_alive(pid) for pid in remaining):
            time.sleep(_POLL_INTERVAL_S)


def _signal_and_wait(pid: int, first: int | None, timeout_s: float) -> None:
    """Send ``first`` (if any), wait up to ``timeout_s``, then SIGKILL and wait a little more."""
    for sig, wait_s in ((first, timeout_s), (signal.SIGKILL, _KILL_WAIT_S)):
        if sig is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not is_alive(pid):
                return
            time.sleep(_POLL_INTERVAL_S)


def _tail(path: Path, lines: int = 3) -> str:
    """The last few lines of a log, indented, for an error message (empty when unreadable)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 4096))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    last = [line.strip()[:300] for line in text.splitlines() if line.strip()][-lines:]
    return "".join(f"\n    {line}" for line in last)


def wait_until(
    check: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    alive: Callable[[], bool] | None = None,
    exit_note: Callable[[], str] | None = None,
    log_path: Path | None = None,
) -> None:
    """Poll ``check`` until it returns ``True``; raise :class:`ServiceStartError` on timeout.

    ``alive`` (when given) is polled too, so a process that died fails fast instead of waiting
    for the whole timeout; ``exit_note`` then says how it ended.
    """

    def hint() -> str:
        return f"; see {log_path}{_tail(log_path)}" if log_path is not None else ""

    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return
        if alive is not None and not alive():
            note = exit_note() if exit_note is not None else ""
            raise ServiceStartError(f"{what}: the process exited{note}{hint()}")
        if time.monotonic() >= deadline:
            raise ServiceStartError(f"{what}: not healthy after {timeout_s:.0f} s{hint()}")
        time.sleep(_POLL_INTERVAL_S)
