"""Pid files, process identity, spawning, stopping and health waits (stack.process)."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack import process
from stack.errors import PortInUseError, ServiceStartError
from stack.process import (
    PidFile,
    children_of,
    cmdline,
    exit_description,
    is_alive,
    locked,
    owns,
    port_is_open,
    spawn,
    terminate,
    wait_until,
)

_SLEEPER = "import sys, time; time.sleep(float(sys.argv[1]))"
_STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(float(sys.argv[1]))"
)
_HELPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
_LATE_HELPER = (
    "import signal, subprocess, sys, time\n"
    "def stop(_signum, _frame):\n"
    f"    helper = subprocess.Popen([sys.executable, '-c', {_HELPER!r}])\n"
    "    open(sys.argv[2], 'w').write(str(helper.pid))\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('ready', flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
)
"""A service that starts a helper (ignoring SIGTERM) only once it is asked to stop, the way
Triton can start a backend stub after stop() listed its children."""


def _gone(pid: int) -> bool:
    return not is_alive(pid)


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[list[int]]:
    """Pids spawned by a test; any still alive are killed afterwards."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if is_alive(pid):
            os.kill(pid, signal.SIGKILL)
            wait_until(functools.partial(_gone, pid), timeout_s=5, what="cleanup")


def test_pid_file_round_trip(tmp_path: Path) -> None:
    """A written pid reads back; after remove the file is gone and read gives None."""
    pid_file = PidFile(tmp_path / "sub" / "x.pid")
    assert pid_file.read() is None
    pid_file.write(4321)
    assert pid_file.read() == 4321
    pid_file.remove()
    assert not pid_file.path.exists()
    assert pid_file.read() is None
    pid_file.remove()  # twice is fine


@pytest.mark.parametrize("content", ["", "abc", "-5", "0", "12 13"])
def test_pid_file_rejects_garbage(tmp_path: Path, content: str) -> None:
    """A pid file holding no positive integer reads as None rather than raising."""
    path = tmp_path / "x.pid"
    path.write_text(content, encoding="ascii")
    assert PidFile(path).read() is None


def test_spawn_records_cmdline_and_owns_checks_marker(tmp_path: Path, spawned: list[int]) -> None:
    """A spawned process is alive, its cmdline is readable, and owns() requires the marker."""
    marker = str(tmp_path / "marker-for-this-test")
    pid = spawn([sys.executable, "-c", _SLEEPER, "30", marker], log_path=tmp_path / "log.txt")
    spawned.append(pid)
    assert is_alive(pid)
    assert marker in cmdline(pid)
    assert owns(pid, marker)
    assert not owns(pid, str(tmp_path / "another-marker"))
    assert not owns(None, marker)


def test_owns_a_fresh_child_while_its_proc_cmdline_is_still_empty(
    tmp_path: Path, spawned: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after spawn the child may still be inside execve and /proc shows no argv; owns()
    judges a running child of ours by the argv it was spawned with, so it is not taken for dead
    (the cause of the flaky "triton ... the process exited" restart failure under load)."""
    marker = str(tmp_path / "marker-exec-window")
    pid = spawn([sys.executable, "-c", _SLEEPER, "30", marker], log_path=tmp_path / "log.txt")
    spawned.append(pid)
    monkeypatch.setattr(process, "_read_cmdline", lambda _pid: ())
    assert owns(pid, marker)
    assert not owns(pid, str(tmp_path / "another-marker"))


def test_owns_forgets_the_spawn_argv_once_the_child_is_gone(
    tmp_path: Path, spawned: list[int]
) -> None:
    """After our child exits, owns() is False: the remembered argv never outlives the process."""
    marker = str(tmp_path / "marker-gone")
    pid = spawn([sys.executable, "-c", _SLEEPER, "0", marker], log_path=tmp_path / "log.txt")
    spawned.append(pid)
    wait_until(lambda: not is_alive(pid), timeout_s=10, what="exit")
    assert not owns(pid, marker)


def test_cmdline_rereads_an_empty_command_line_of_a_live_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live process whose /proc cmdline reads empty for a moment (mid-execve) is read again
    until the argv shows, instead of returning an empty command line."""
    marker = str(tmp_path / "marker-reread")
    other = subprocess.Popen([sys.executable, "-c", _SLEEPER, "30", marker])
    real = process._read_cmdline
    calls: list[int] = []

    def empty_at_first(pid: int) -> tuple[str, ...]:
        calls.append(pid)
        return () if len(calls) <= 3 else real(pid)

    try:
        wait_until(lambda: marker in real(other.pid), timeout_s=10, what="exec")
        monkeypatch.setattr(process, "_read_cmdline", empty_at_first)
        assert marker in cmdline(other.pid)
        assert len(calls) == 4
    finally:
        other.kill()
        other.wait()


def test_cmdline_of_a_zombie_or_gone_process_is_empty_without_waiting() -> None:
    """The re-read is only for live processes: a zombie and a reaped pid answer () at once."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_until(lambda: not is_alive(child.pid), timeout_s=10, what="zombie")
        started = time.monotonic()
        assert cmdline(child.pid) == ()
        assert time.monotonic() - started < 1.0
    finally:
        child.wait()
    started = time.monotonic()
    assert cmdline(child.pid) == ()
    assert time.monotonic() - started < 1.0


def test_terminate_leaves_foreign_process_alone(tmp_path: Path, spawned: list[int]) -> None:
    """terminate() refuses a live process whose cmdline lacks the marker (a reused pid)."""
    pid = spawn([sys.executable, "-c", _SLEEPER, "30"], log_path=tmp_path / "log.txt")
    spawned.append(pid)
    assert terminate(pid, str(tmp_path / "not-in-its-cmdline"), timeout_s=1) is False
    time.sleep(0.2)
    assert is_alive(pid)


def test_terminate_stops_our_process(tmp_path: Path, spawned: list[int]) -> None:
    """terminate() stops a process of ours with SIGTERM and reports it."""
    marker = str(tmp_path / "ours")
    pid = spawn([sys.executable, "-c", _SLEEPER, "30", marker], log_path=tmp_path / "log.txt")
    spawned.append(pid)
    assert terminate(pid, marker, timeout_s=10) is True
    assert not is_alive(pid)


def test_terminate_escalates_to_sigkill(tmp_path: Path, spawned: list[int]) -> None:
    """A process ignoring SIGTERM is killed with SIGKILL once the timeout passes."""
    marker = str(tmp_path / "stubborn")
    log = tmp_path / "log.txt"
    pid = spawn([sys.executable, "-c", _STUBBORN, "30", marker], log_path=log)
    spawned.append(pid)
    wait_until(lambda: "ready" in log.read_text(), timeout_s=10, what="stubborn child")
    started = time.monotonic()
    assert terminate(pid, marker, timeout_s=0.5) is True
    assert not is_alive(pid)
    assert time.monotonic() - started >= 0.5


def test_terminate_waits_for_a_helper_started_after_the_signal(
    tmp_path: Path, spawned: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper the service started after terminate() listed its children (so an orphan by the
    time the service exits) is still found through the process group and killed."""
    monkeypatch.setattr(process, "_CHILD_GRACE_S", 0.5)
    marker = str(tmp_path / "late-helper")
    log = tmp_path / "log.txt"
    helper_file = tmp_path / "helper.pid"
    pid = spawn([sys.executable, "-c", _LATE_HELPER, "30", str(helper_file), marker], log_path=log)
    spawned.append(pid)
    wait_until(lambda: "ready" in log.read_text(), timeout_s=10, what="service")
    assert children_of(pid) == []
    assert terminate(pid, marker, timeout_s=10) is True
    helper = int(helper_file.read_text())
    spawned.append(helper)
    assert not is_alive(pid)
    assert not is_alive(helper)


def test_terminate_of_dead_pid_is_false(tmp_path: Path) -> None:
    """terminate() on a pid that no longer runs does nothing and says so."""
    pid = spawn([sys.executable, "-c", "pass"], log_path=tmp_path / "log.txt")
    wait_until(lambda: not is_alive(pid), timeout_s=10, what="short child")
    assert terminate(pid, "anything", timeout_s=1) is False


def test_spawn_refuses_a_taken_port(tmp_path: Path) -> None:
    """spawn() fails with PortInUseError when a listed port already accepts connections."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_is_open(port)
        with pytest.raises(PortInUseError, match=str(port)):
            spawn([sys.executable, "-c", "pass"], log_path=tmp_path / "log.txt", ports=[port])


def test_spawn_of_missing_program_is_a_start_error(tmp_path: Path) -> None:
    """A program that does not exist surfaces as ServiceStartError, not OSError."""
    with pytest.raises(ServiceStartError):
        spawn([str(tmp_path / "no-such-program")], log_path=tmp_path / "log.txt")


def test_wait_until_times_out_with_log_tail(tmp_path: Path) -> None:
    """On timeout the error names the log and quotes its last lines as they are at that moment."""
    log = tmp_path / "service.log"
    log.write_text("starting\n", encoding="utf-8")

    def check() -> bool:
        with log.open("a", encoding="utf-8") as handle:
            handle.write("error: port clash\n")
        return False

    with pytest.raises(ServiceStartError, match=r"service\.log(.|\n)*error: port clash"):
        wait_until(check, timeout_s=0.3, what="never", log_path=log)


def test_wait_until_fails_fast_when_process_dies() -> None:
    """wait_until() stops waiting as soon as ``alive`` says the process is gone."""
    started = time.monotonic()
    with pytest.raises(ServiceStartError, match="exited"):
        wait_until(lambda: False, timeout_s=30, what="dead", alive=lambda: False)
    assert time.monotonic() - started < 5


def test_wait_until_returns_when_check_passes() -> None:
    """wait_until() returns once the check becomes true."""
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        return len(calls) >= 3

    wait_until(check, timeout_s=10, what="eventually")
    assert len(calls) == 3


def test_locked_serialises_holders(tmp_path: Path) -> None:
    """A second holder of the stack lock waits until the first releases it."""
    import threading

    lock_path = tmp_path / "x.lock"
    events: list[str] = []
    first_inside = threading.Event()

    def second() -> None:
        first_inside.wait(5)
        with locked(lock_path):
            events.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with locked(lock_path):
        first_inside.set()
        time.sleep(0.3)
        events.append("first")
    thread.join(5)
    assert events == ["first", "second"]


def test_exit_description_names_status_and_signal(tmp_path: Path) -> None:
    """A spawned child's end is described by exit status or by the signal that killed it."""
    failing = spawn([sys.executable, "-c", "raise SystemExit(3)"], log_path=tmp_path / "a")
    wait_until(lambda: not is_alive(failing), timeout_s=10, what="failing child")
    assert exit_description(failing) == " (exit status 3)"
    killed = spawn([sys.executable, "-c", _SLEEPER, "30"], log_path=tmp_path / "b")
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: not is_alive(killed), timeout_s=10, what="killed child")
    assert exit_description(killed) == " (killed by SIGKILL)"
    assert exit_description(os.getpid()) == ""


def test_children_of_finds_direct_children(tmp_path: Path, spawned: list[int]) -> None:
    """children_of() lists the processes whose parent is the given pid."""
    pid = spawn([sys.executable, "-c", _SLEEPER, "30"], log_path=tmp_path / "log.txt")
    spawned.append(pid)
    assert pid in children_of(os.getpid())
    assert children_of(pid) == []
