"""Tests for bench.process_stats: CPU time, RSS and descriptors read from /proc."""

from __future__ import annotations

import math
import os

import pytest

from bench.process_stats import (
    busiest,
    busy_fraction,
    command_name_from_stat,
    cpu_by_process,
    cpu_seconds_from_stat,
    machine_ticks_from_stat,
    rss_bytes_from_status,
    sample,
)


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


def test_machine_ticks_count_idle_and_iowait_as_not_busy() -> None:
    """Busy ticks are all counters but idle and iowait; total is their sum (guest excluded)."""
    stat = "cpu  100 5 50 800 40 0 5 0 7 0\ncpu0 50 2 25 400 20 0 2 0 0 0\nintr 1\n"
    assert machine_ticks_from_stat(stat) == (160, 1000)


def test_busy_fraction_is_the_busy_share_between_two_readings() -> None:
    """300 busy ticks of 400 elapsed is 75 %; no elapsed ticks is nan."""
    assert busy_fraction((100, 1000), (400, 1400)) == 0.75
    assert math.isnan(busy_fraction((1, 2), (1, 2)))


def test_command_name_is_read_between_the_first_and_last_parenthesis() -> None:
    stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194304 10 0 0 0 250 50 0 0 20 0 1 0 9 0 0"
    assert command_name_from_stat(stat) == "my (odd) name"


def test_busiest_sums_a_name_labels_given_pids_and_counts_new_processes_whole() -> None:
    """Two postgres backends sum; the labelled pid stands alone; a pid reused by another program
    or started in between counts from zero; the result is in cores, busiest first."""
    before = {1: ("postgres", 10.0), 2: ("postgres", 5.0), 3: ("python", 100.0), 4: ("java", 1.0)}
    after = {
        1: ("postgres", 12.0),
        2: ("postgres", 6.0),
        3: ("python", 108.0),
        4: ("sh", 0.5),
        5: ("python", 4.0),
    }
    top = busiest(before, after, 4.0, {3: "service"}, count=3)
    assert top == [("service", 2.0), ("python", 1.0), ("postgres", 0.75)]


def test_cpu_by_process_sees_this_process() -> None:
    readings = cpu_by_process()
    assert os.getpid() in readings
    assert readings[os.getpid()][1] > 0.0
