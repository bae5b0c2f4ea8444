"""Tests for engine.failpoints: arming by action, name and count; nothing happens when unarmed."""

from __future__ import annotations

import pytest

from common.publishing import PublishError
from engine.failpoints import FAILPOINT_NAMES, FailpointError, FailpointRaised, Failpoints
from engine.inference import InferenceError
from engine.stores.database import StoreError


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


def test_explicit_kill_action_is_the_default_action() -> None:
    """``kill:after_fetch@2`` kills on the second pass, like ``after_fetch@2``."""
    kill = Recorder()
    points = Failpoints("kill:after_fetch@2", kill=kill)
    points.hit("after_fetch")
    assert kill.kills == 0
    points.hit("after_fetch")
    assert kill.kills == 1
    assert (points.armed, points.action) == ("after_fetch", "kill")


def test_raise_action_raises_on_the_nth_pass_without_killing() -> None:
    """``raise:during_inference@2`` raises FailpointRaised on the second pass and never kills."""
    kill = Recorder()
    points = Failpoints("raise:during_inference@2", kill=kill)
    assert (points.armed, points.action) == ("during_inference", "raise")
    points.hit("during_inference")
    points.hit("after_pg_commit")
    with pytest.raises(FailpointRaised) as raised:
        points.hit("during_inference")
    assert (raised.value.name, raised.value.count) == ("during_inference", 2)
    assert kill.kills == 0


def test_each_action_fires_once() -> None:
    """Passes after the armed one neither kill again nor raise again."""
    kill = Recorder()
    killing = Failpoints("after_rules", kill=kill)
    raising = Failpoints("raise:after_rules", kill=kill)
    killing.hit("after_rules")
    with pytest.raises(FailpointRaised):
        raising.hit("after_rules")
    for _ in range(3):
        killing.hit("after_rules")
        raising.hit("after_rules")
    assert kill.kills == 1


def test_raised_error_is_not_one_the_pipeline_handles() -> None:
    """FailpointRaised is none of the errors the pipeline expects and handles (inference, store,
    publish failures, bad specifications), so it reaches the worker as an unexpected one."""
    handled = (InferenceError, StoreError, PublishError, FailpointError)
    assert not issubclass(FailpointRaised, handled)
    assert issubclass(FailpointRaised, Exception)


@pytest.mark.parametrize(
    "spec",
    [
        "after_lunch",
        "after_fetch@0",
        "after_fetch@x",
        "explode:after_fetch",
        "raise:",
        "raise:after_lunch@2",
        "raise:after_fetch@-1",
        ":after_fetch",
        "raise:kill:after_fetch",
    ],
)
def test_bad_specifications_are_rejected(spec: str) -> None:
    """Unknown actions, unknown names and counts that are not positive integers raise
    FailpointError."""
    with pytest.raises(FailpointError):
        Failpoints(spec)
