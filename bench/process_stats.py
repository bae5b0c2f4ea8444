"""What a running process costs, read from ``/proc``: CPU seconds, resident memory, open files;
how busy the whole machine was between two readings of ``/proc/stat``; and which programs used
the cores between two readings of every process (``cpu_by_process``, ``busiest``).

The benchmarks compare the worker's CPU per message and watch its memory and descriptors over a
soak; the shared machine is too noisy for wall time alone, CPU time is not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ProcessSample",
    "busiest",
    "busy_fraction",
    "command_name_from_stat",
    "cpu_by_process",
    "cpu_seconds_from_stat",
    "machine_ticks",
    "machine_ticks_from_stat",
    "rss_bytes_from_status",
    "sample",
]

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_UTIME_FIELD = 13  # 0-based index of utime among /proc/PID/stat's fields (stime follows)


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One reading of a process."""

    cpu_s: float
    """User plus system CPU time so far."""
    rss_bytes: int
    open_fds: int


def cpu_seconds_from_stat(stat: str, ticks_per_s: int = _TICKS_PER_S) -> float:
    """User plus system CPU seconds from the text of ``/proc/PID/stat``.

    The command name (field 2, in parentheses) may hold spaces and parentheses, so fields are
    counted from after its last ``)``.
    """
    after_name = stat[stat.rindex(")") + 2 :].split()
    # after_name[0] is field 3 (state); utime is field 14, stime field 15 (1-based).
    utime = int(after_name[_UTIME_FIELD - 2])
    stime = int(after_name[_UTIME_FIELD - 1])
    return (utime + stime) / ticks_per_s


def command_name_from_stat(stat: str) -> str:
    """The command name (field 2, between the first ``(`` and the last ``)``) of a stat text."""
    return stat[stat.index("(") + 1 : stat.rindex(")")]


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every process's command name and CPU seconds so far (one that exits meanwhile is left
    out)."""
    readings: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = (Path("/proc") / entry / "stat").read_text()
        except OSError:
            continue
        readings[int(entry)] = (command_name_from_stat(stat), cpu_seconds_from_stat(stat))
    return readings


def busiest(
    before: dict[int, tuple[str, float]],
    after: dict[int, tuple[str, float]],
    seconds: float,
    names: dict[int, str],
    count: int = 6,
) -> list[tuple[str, float]]:
    """The ``count`` programs that used the most cores between two ``cpu_by_process``
    readings ``seconds`` apart, busiest first. Processes of one command name are summed (all
    PostgreSQL backends are ``postgres``); ``names`` labels particular pids instead."""
    used: dict[str, float] = {}
    for pid, (name, cpu_s) in after.items():
        start = before.get(pid)
        spent = cpu_s - (start[1] if start is not None and start[0] == name else 0.0)
        label = names.get(pid, name)
        used[label] = used.get(label, 0.0) + spent / seconds
    return sorted(used.items(), key=lambda item: item[1], reverse=True)[:count]


def rss_bytes_from_status(status: str) -> int:
    """Resident memory from the text of ``/proc/PID/status`` (its ``VmRSS`` line, in kB)."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmRSS line (a zombie or kernel thread)")


def sample(pid: int) -> ProcessSample:
    """Read ``pid``'s CPU time, RSS and open file descriptors now."""
    proc = Path("/proc") / str(pid)
    return ProcessSample(
        cpu_s=cpu_seconds_from_stat((proc / "stat").read_text()),
        rss_bytes=rss_bytes_from_status((proc / "status").read_text()),
        open_fds=len(os.listdir(proc / "fd")),
    )


_IDLE_FIELDS = (3, 4)  # idle and iowait among the "cpu" line's counters


def machine_ticks_from_stat(stat: str) -> tuple[int, int]:
    """``(busy, total)`` CPU ticks of all cores from the text of ``/proc/stat``."""
    for line in stat.splitlines():
        if line.startswith("cpu "):
            counters = [int(x) for x in line.split()[1:9]]  # up to steal; guest is in user
            idle = sum(counters[i] for i in _IDLE_FIELDS)
            return sum(counters) - idle, sum(counters)
    raise ValueError("no aggregate cpu line")


def machine_ticks() -> tuple[int, int]:
    """``(busy, total)`` CPU ticks of the machine now."""
    return machine_ticks_from_stat(Path("/proc/stat").read_text())


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of CPU time the machine was busy between two ``machine_ticks`` readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else float("nan")
