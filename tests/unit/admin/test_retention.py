"""Retention arithmetic: --keep parsing and which monthly partitions fall before the cutoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from admin.retention import RetentionError, parse_keep, partitions_to_drop


def test_parse_keep_accepts_days_and_weeks() -> None:
    """90d is ninety days and 12w twelve weeks."""
    assert parse_keep("90d") == timedelta(days=90)
    assert parse_keep(" 12w ") == timedelta(weeks=12)


@pytest.mark.parametrize("text", ["", "90", "0d", "3m", "-5d", "1.5d", "d"])
def test_parse_keep_rejects_nonsense(text: str) -> None:
    """Anything but a positive whole number of days or weeks is an error."""
    with pytest.raises(RetentionError):
        parse_keep(text)


def test_only_whole_months_before_the_cutoff_are_dropped() -> None:
    """A month is dropped when it ends at or before the cutoff; the cutoff's month stays."""
    names = [
        "verdicts_2026_01",
        "verdicts_2025_12",
        "verdicts_2026_02",
        "verdicts_2026_03",
        "verdicts_default",
        "verdicts_other",
    ]
    cutoff = datetime(2026, 3, 1, tzinfo=UTC)
    assert partitions_to_drop(names, cutoff) == [
        "verdicts_2025_12",
        "verdicts_2026_01",
        "verdicts_2026_02",
    ]
    just_before = cutoff - timedelta(microseconds=1)
    assert partitions_to_drop(names, just_before) == ["verdicts_2025_12", "verdicts_2026_01"]
    assert partitions_to_drop(names, datetime(2025, 12, 31, tzinfo=UTC)) == []
