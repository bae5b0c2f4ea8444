"""bench.analytics_data: the synthetic history is well-formed COPY text with the promised shape."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from bench.analytics_data import (
    EVENT_COLUMNS,
    REVIEW_ITEM_COLUMNS,
    VERDICT_COLUMNS,
    HistorySpec,
    ReviewItemSeed,
    review_event_rows,
    review_item_rows,
    verdict_hours,
)

_SPEC = HistorySpec(rows=20_000, end=datetime(2026, 12, 4, 12, tzinfo=UTC), days=3, seed=1)


def _verdict_lines() -> tuple[list[list[str]], list[ReviewItemSeed]]:
    lines: list[list[str]] = []
    seeds: list[ReviewItemSeed] = []
    for hour in verdict_hours(_SPEC):
        rows = hour.copy_text.decode().splitlines()
        assert len(rows) == hour.rows
        lines.extend(row.split("\t") for row in rows)
        seeds.extend(hour.escalations)
    return lines, seeds


def test_every_row_has_every_column_and_the_requested_count() -> None:
    """Exactly ``rows`` verdicts, each with one field per column, keys unique."""
    lines, _ = _verdict_lines()
    assert len(lines) == _SPEC.rows
    assert {len(fields) for fields in lines} == {len(VERDICT_COLUMNS)}
    keys = Counter((f[0], f[1], f[2]) for f in lines)
    assert max(keys.values()) == 1


def test_decisions_stages_and_escalations_are_consistent() -> None:
    """Rules block without a model; model rows carry scores; each escalation has a review item;
    the mix is mostly allowed, with some of every decision and stage."""
    lines, seeds = _verdict_lines()
    col = {name: i for i, name in enumerate(VERDICT_COLUMNS)}
    decisions = Counter(f[col["decision"]] for f in lines)
    stages = Counter(f[col["decided_by"]] for f in lines)
    assert decisions["allow"] > 0.8 * len(lines)
    assert min(decisions["flag"], decisions["block"]) > 0
    assert min(stages["rules"], stages["model"]) > 0
    for f in lines:
        if f[col["decided_by"]] == "rules":
            assert f[col["decision"]] == "block"
            assert f[col["scores"]] == "\\N"
        if f[col["decided_by"]] == "model":
            assert f[col["scores"]].startswith("{")
    assert sum(f[col["escalated"]] == "t" for f in lines) == len(seeds)


def test_review_items_and_events_line_up() -> None:
    """One item per escalation; events name items 1..n; resolved items end in a decision."""
    _, seeds = _verdict_lines()
    items, reviews = review_item_rows(seeds, _SPEC.end, _SPEC.seed)
    rows = [line.split("\t") for line in items.decode().splitlines()]
    assert len(rows) == len(seeds)
    assert {len(r) for r in rows} == {len(REVIEW_ITEM_COLUMNS)}
    events = [line.split("\t") for line in review_event_rows(seeds, reviews).decode().splitlines()]
    assert {len(e) for e in events} == {len(EVENT_COLUMNS)}
    assert {int(e[0]) for e in events} <= set(range(1, len(seeds) + 1))
    resolved = sum(review.status == "resolved" for review in reviews)
    assert resolved > 0
    decisions = [e for e in events if e[2] in {"approve", "remove_message", "warn", "mute", "ban"}]
    assert len(decisions) == resolved
