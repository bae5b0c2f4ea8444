"""Tests for worker.backpressure: pause at the high mark, resume only below the low mark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.backpressure import Backpressure, FlowAction


def test_pause_at_limit_and_resume_below_low_mark() -> None:
    """Reaching the limit pauses; values between the marks keep the state; the low mark resumes."""
    bp = Backpressure(100, 0.5)
    assert bp.update(99) is FlowAction.KEEP
    assert bp.update(100) is FlowAction.PAUSE
    assert bp.paused
    assert bp.update(120) is FlowAction.KEEP
    assert bp.update(51) is FlowAction.KEEP
    assert bp.update(50) is FlowAction.RESUME
    assert not bp.paused
    assert bp.update(99) is FlowAction.KEEP


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=200))
def test_actions_alternate_and_match_the_marks(levels: list[int]) -> None:
    """Over any sequence, PAUSE and RESUME alternate (starting with PAUSE), a PAUSE happens only
    at or above the limit and a RESUME only at or below the low mark."""
    bp = Backpressure(150, 0.4)
    last: FlowAction | None = None
    for level in levels:
        action = bp.update(level)
        if action is FlowAction.KEEP:
            continue
        assert action is not last
        if action is FlowAction.PAUSE:
            assert level >= 150
        else:
            assert level <= 60
        last = action


@pytest.mark.parametrize(("high", "ratio"), [(0, 0.5), (10, 0.0), (10, 1.0)])
def test_invalid_marks_are_rejected(high: int, ratio: float) -> None:
    """A non-positive limit or a ratio outside (0, 1) is a configuration error."""
    with pytest.raises(ValueError, match="high_records"):
        Backpressure(high, ratio)


def test_bytes_alone_pause_and_both_marks_must_clear_to_resume() -> None:
    """A few huge records pause on bytes; resuming needs records and bytes under their low marks."""
    bp = Backpressure(1_000, 0.5, high_bytes=10_000)
    assert bp.update(3, 9_999) is FlowAction.KEEP
    assert bp.update(4, 10_000) is FlowAction.PAUSE
    assert bp.update(2, 6_000) is FlowAction.KEEP
    assert bp.update(600, 1_000) is FlowAction.KEEP
    assert bp.update(2, 5_000) is FlowAction.RESUME


def test_a_byte_limit_below_one_is_refused() -> None:
    """high_bytes must be positive (or None)."""
    with pytest.raises(ValueError, match="high_bytes"):
        Backpressure(10, 0.5, high_bytes=0)
