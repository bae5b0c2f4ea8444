"""Tests for bench.soak_figures: the memory slope and the soak's last line."""

from __future__ import annotations

import math

import pytest

from bench.soak_figures import SoakFigures, slope_per_hour, soak_line


def test_slope_of_a_straight_line_is_its_rate_per_hour() -> None:
    """Points rising 1 MB per minute give a slope of 60 MB per hour."""
    points = [(60.0 * i, 100.0 + i) for i in range(10)]
    assert slope_per_hour(points) == pytest.approx(60.0)


def test_slope_of_flat_noise_is_near_zero() -> None:
    """Memory alternating around a level has a slope close to zero."""
    points = [(30.0 * i, 100.0 + (0.5 if i % 2 else -0.5)) for i in range(60)]
    assert abs(slope_per_hour(points)) < 2.0


def test_slope_needs_two_distinct_times() -> None:
    """One point, or points at one time, give nan."""
    assert math.isnan(slope_per_hour([(0.0, 1.0)]))
    assert math.isnan(slope_per_hour([(5.0, 1.0), (5.0, 2.0)]))


def test_soak_line_lists_every_field_and_the_growth() -> None:
    """The last line has every field in order, integers bare, and rss_growth_mb last."""
    line = soak_line(
        SoakFigures(
            minutes=30.0,
            rate_msgs_per_s=612.34,
            rss_start_mb=91.5,
            rss_end_mb=95.25,
            rss_slope_mb_per_h=3.04,
            fds_start=21,
            fds_end=21,
            tasks_start=29,
            tasks_end=28,
            produced=1000,
            verdicts=1000,
        )
    )
    assert line == (
        "minutes=30.0 rate_msgs_per_s=612.3 rss_start_mb=91.5 rss_end_mb=95.2 "
        "rss_slope_mb_per_h=3.0 fds_start=21 fds_end=21 tasks_start=29 tasks_end=28 "
        "produced=1000 verdicts=1000 rss_growth_mb=3.8"
    )
