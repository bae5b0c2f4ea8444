"""Tests for worker.failpoints: arming by name and count, and nothing happens when unarmed."""

from __future__ import annotations

import pytest

from worker.failpoints import FAILPOINT_NAMES, FailpointError, Failpoints


class Recorder:
    def __init__(self) -> None:
        self.kills = 0

    def __call__(self) -> None:
        self.kills += 1


def test_unarmed_never_kills() -> None:
    """With no specification, passing every named point does nothing."""
    kill = Recorder()
    points = Failpoints(None, kill=kill)
    for name in FAILPOINT_NAMES * 3:
        points.hit(name)
    assert kill.kills == 0
    assert points.armed is None


def test_kills_on_the_nth_pass_of_the_armed_point_only() -> None:
    """``after_pg_commit@3`` kills on the third pass of that point, ignoring the others."""
    kill = Recorder()
    points = Failpoints("after_pg_commit@3", kill=kill)
    points.hit("after_fetch")
    points.hit("after_pg_commit")
    points.hit("after_pg_commit")
    assert kill.kills == 0
    points.hit("after_pg_commit")
    assert kill.kills == 1


def test_bare_name_kills_on_first_pass() -> None:
    """A name without a count arms the first pass."""
    kill = Recorder()
    Failpoints("during_publish", kill=kill).hit("during_publish")
    assert kill.kills == 1


@pytest.mark.parametrize("spec", ["after_lunch", "after_fetch@0", "after_fetch@x"])
def test_bad_specifications_are_rejected(spec: str) -> None:
    """Unknown names and counts that are not positive integers raise FailpointError."""
    with pytest.raises(FailpointError):
        Failpoints(spec)
