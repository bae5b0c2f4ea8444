"""Tests for engine.offsets: commit points never pass an unfinished record."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.offsets import OffsetTracker, PartitionKey

KEY: PartitionKey = ("chat", 0)


def _oracle(started: list[int], done: set[int], next_offset: int) -> int:
    """The commit point by definition: the smallest started offset not durable, else next."""
    unfinished = [o for o in started if o not in done]
    return min(unfinished) if unfinished else next_offset


@st.composite
def _scenarios(
    draw: st.DrawFn,
) -> tuple[dict[PartitionKey, list[int]], list[tuple[PartitionKey, list[int]]], set[PartitionKey]]:
    """Per partition: ascending offsets with gaps; completion groups in random order; revokes."""
    n_parts = draw(st.integers(min_value=1, max_value=4))
    started: dict[PartitionKey, list[int]] = {}
    groups: list[tuple[PartitionKey, list[int]]] = []
    for p in range(n_parts):
        key: PartitionKey = ("chat", p)
        first = draw(st.integers(min_value=0, max_value=1000))
        gaps = draw(st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=30))
        offsets = [first]
        for gap in gaps[1:]:
            offsets.append(offsets[-1] + gap)  # gaps: compaction, transaction markers
        started[key] = offsets
        shuffled = draw(st.permutations(offsets))
        i = 0
        while i < len(shuffled):
            size = draw(st.integers(min_value=1, max_value=5))
            groups.append((key, list(shuffled[i : i + size])))
            i += size
    order = draw(st.permutations(range(len(groups))))
    forgotten = draw(st.sets(st.sampled_from(sorted(started)), max_size=n_parts))
    return started, [groups[i] for i in order], forgotten


@settings(max_examples=300, deadline=None)
@given(_scenarios(), st.data())
def test_durable_point_matches_oracle_under_random_completion(
    scenario: tuple[
        dict[PartitionKey, list[int]], list[tuple[PartitionKey, list[int]]], set[PartitionKey]
    ],
    data: st.DataObject,
) -> None:
    """Random groupings, orders and revocations: durable_point and point_with follow the oracle."""
    started, groups, forgotten = scenario
    tracker = OffsetTracker()
    for key, offsets in started.items():
        for offset in offsets:
            tracker.start(key, offset)
    done: dict[PartitionKey, set[int]] = {key: set() for key in started}
    forget_at = {
        key: data.draw(st.integers(min_value=0, max_value=len(groups)), label=f"forget {key}")
        for key in forgotten
    }
    gone: set[PartitionKey] = set()
    for step, (key, group) in enumerate(groups):
        for k, at in forget_at.items():
            if at == step and k not in gone:
                tracker.forget(k)
                gone.add(k)
        nxt = started[key][-1] + 1
        if key in gone:
            assert tracker.point_with(key, group) is None
            tracker.mark_durable(key, group)  # a late batch of a revoked partition: harmless
            assert tracker.durable_point(key) is None
            continue
        before = tracker.durable_point(key)
        predicted = tracker.point_with(key, group)
        assert predicted == _oracle(started[key], done[key] | set(group), nxt)
        assert tracker.durable_point(key) == before  # point_with changes nothing
        tracker.mark_durable(key, group)
        done[key].update(group)
        point = tracker.durable_point(key)
        assert point == predicted
        assert point == _oracle(started[key], done[key], nxt)
        unfinished = [o for o in started[key] if o not in done[key]]
        assert point is not None
        assert all(point <= o for o in unfinished)
        for other in started:
            if other not in gone:
                assert tracker.durable_point(other) == _oracle(
                    started[other], done[other], started[other][-1] + 1
                )
    for key in started:
        if key in gone:
            assert tracker.durable_point(key) is None
        else:
            assert tracker.durable_point(key) == started[key][-1] + 1
    assert tracker.in_flight() == 0
    assert tracker.pending_in(started) == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=40, unique=True),
    st.data(),
)
def test_point_with_never_passes_an_unfinished_record(
    offsets: list[int], data: st.DataObject
) -> None:
    """point_with(extra) stops at the first started record neither durable nor in extra."""
    offsets.sort()
    tracker = OffsetTracker()
    for offset in offsets:
        tracker.start(KEY, offset)
    done = data.draw(st.sets(st.sampled_from(offsets)), label="done")
    tracker.mark_durable(KEY, done)
    extra = data.draw(st.sets(st.sampled_from(offsets)), label="extra")
    point = tracker.point_with(KEY, extra)
    unfinished = [o for o in offsets if o not in done and o not in extra]
    assert point == (min(unfinished) if unfinished else offsets[-1] + 1)


def test_pending_in_counts_only_named_partitions() -> None:
    """pending_in sums pending records of the given partitions and ignores unknown ones."""
    tracker = OffsetTracker()
    for offset in range(3):
        tracker.start(("chat", 0), offset)
    tracker.start(("chat", 1), 7)
    assert tracker.pending_in([("chat", 0)]) == 3
    assert tracker.pending_in([("chat", 0), ("chat", 1), ("chat", 9)]) == 4
    tracker.mark_durable(("chat", 0), [0, 2])
    assert tracker.pending_in([("chat", 0)]) == 2
    assert tracker.in_flight() == 3


def test_start_rejects_offsets_going_backwards() -> None:
    """A partition's offsets must be started in ascending order."""
    tracker = OffsetTracker()
    tracker.start(KEY, 5)
    with pytest.raises(ValueError, match="behind"):
        tracker.start(KEY, 4)


def test_unknown_partition_has_no_point() -> None:
    """A partition never seen (or forgotten) has no commit point and ignores marks."""
    tracker = OffsetTracker()
    assert tracker.durable_point(KEY) is None
    assert tracker.point_with(KEY, [1]) is None
    tracker.mark_durable(KEY, [1])
    assert tracker.partitions() == []


def test_forget_then_restart_begins_a_fresh_partition_state() -> None:
    """After revoke and reassignment the partition restarts at the newly fetched offset."""
    tracker = OffsetTracker()
    tracker.start(KEY, 10)
    tracker.forget(KEY)
    tracker.start(KEY, 3)
    assert tracker.durable_point(KEY) == 3
    tracker.mark_durable(KEY, [3])
    assert tracker.durable_point(KEY) == 4


def test_bytes_in_flight_follow_durability_and_revocation() -> None:
    """Bytes count from start until the record is durable or its partition is forgotten."""
    tracker = OffsetTracker()
    tracker.start(("t", 0), 0, size_bytes=100)
    tracker.start(("t", 0), 1, size_bytes=50)
    tracker.start(("t", 1), 0, size_bytes=7)
    assert tracker.in_flight_bytes() == 157
    tracker.mark_durable(("t", 0), [1])
    assert tracker.in_flight_bytes() == 107
    tracker.mark_durable(("t", 0), [1])
    assert tracker.in_flight_bytes() == 107
    tracker.forget(("t", 0))
    assert tracker.in_flight_bytes() == 7
    tracker.mark_durable(("t", 1), [0])
    assert tracker.in_flight_bytes() == 0
