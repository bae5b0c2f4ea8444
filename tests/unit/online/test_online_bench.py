"""bench.online's arithmetic: nearest-rank percentiles and the achieved rate."""

from __future__ import annotations

from collections import Counter

from bench.online import LoadResult, percentile


def test_percentiles_use_the_nearest_rank() -> None:
    """p50/p99 of 1..100 are 50 and 99; a single value is every percentile; none gives 0."""
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 99) == 0.0


def test_achieved_rate_counts_answered_calls_only() -> None:
    """Refused calls add no latency and no rate: 300 answers in 2 s is 150/s."""
    result = LoadResult([1.0] * 300, Counter({"OK": 300, "RESOURCE_EXHAUSTED": 50}), 2.0, 3.0)
    assert result.rps == 150.0
    assert result.p99_ms == 1.0
