"""Tests for worker.cli_args: moments and model references as the commands read them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from worker.cli_args import ArgumentError, parse_model_ref, parse_moment

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", NOW - timedelta(days=30)),
        ("12h", NOW - timedelta(hours=12)),
        ("90m", NOW - timedelta(minutes=90)),
        ("2w", NOW - timedelta(weeks=2)),
        ("2026-12-01T08:00:00Z", datetime(2026, 12, 1, 8, tzinfo=UTC)),
        (
            "2026-12-01T09:00:00+01:00",
            datetime(2026, 12, 1, 9, tzinfo=timezone(timedelta(hours=1))),
        ),
    ],
)
def test_a_duration_ago_or_an_instant_with_its_offset(text: str, expected: datetime) -> None:
    """Durations count back from now; instants keep their offset."""
    assert parse_moment(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "30", "2026-12-01T08:00:00", "-3d"])
def test_anything_else_is_refused(text: str) -> None:
    """Words, bare numbers, instants without an offset and negative durations are errors."""
    with pytest.raises(ArgumentError):
        parse_moment(text, NOW)


def test_model_references() -> None:
    """NAME and NAME:VERSION; a version must be a number."""
    assert parse_model_ref("moderation") == ("moderation", "")
    assert parse_model_ref("moderation_v1:3") == ("moderation_v1", "3")
    for bad in ("moderation:", "moderation:latest", "", "a b"):
        with pytest.raises(ArgumentError):
            parse_model_ref(bad)
