"""Tests for bench.process_stats: CPU time, RSS and descriptors read from /proc."""

from __future__ import annotations

import os

import pytest

from bench.process_stats import cpu_seconds_from_stat, rss_bytes_from_status, sample


def test_cpu_seconds_adds_user_and_system_ticks_after_an_odd_command_name() -> None:
    """utime and stime are found even when the command name holds spaces and parentheses."""
    stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194304 10 0 0 0 250 50 0 0 20 0 1 0 9 0 0"
    assert cpu_seconds_from_stat(stat, ticks_per_s=100) == pytest.approx(3.0)


def test_rss_is_read_from_vmrss_in_kilobytes() -> None:
    """VmRSS's kB figure becomes bytes; a status without it is refused."""
    assert rss_bytes_from_status("Name:\tpython\nVmRSS:\t   2048 kB\nThreads:\t1\n") == 2 << 20
    with pytest.raises(ValueError, match="VmRSS"):
        rss_bytes_from_status("Name:\tkworker\n")


def test_sample_of_this_process_sees_memory_and_descriptors() -> None:
    """A live process has resident memory, open descriptors and non-negative CPU time."""
    reading = sample(os.getpid())
    assert reading.rss_bytes > 0
    assert reading.open_fds >= 3
    assert reading.cpu_s >= 0.0
