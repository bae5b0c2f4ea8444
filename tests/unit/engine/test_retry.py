"""Tests for engine.retry: the retry budget and jittered backoff."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

import engine.retry as retry_module
from engine.retry import RetryBudget, backoff_s


def _spend_all(budget: RetryBudget, limit: int = 1000) -> int:
    """How many retries the budget grants before it refuses."""
    granted = 0
    while granted < limit and budget.try_spend():
        granted += 1
    return granted


def test_quiet_budget_allows_only_min_retries() -> None:
    """With no calls recorded, exactly min_retries retries are allowed."""
    assert _spend_all(RetryBudget(ratio=0.2, min_retries=3)) == 3


@pytest.mark.parametrize(
    ("calls", "ratio", "min_retries"), [(10, 0.2, 3), (50, 0.1, 0), (7, 0.5, 2)]
)
def test_budget_allows_min_plus_ratio_of_calls(calls: int, ratio: float, min_retries: int) -> None:
    """After N calls the budget grants min_retries + ratio*N retries (rounded up) and no more."""
    budget = RetryBudget(ratio=ratio, min_retries=min_retries)
    for _ in range(calls):
        budget.record_call()
    granted = _spend_all(budget)
    allowed = min_retries + ratio * calls
    assert granted >= allowed
    assert granted < allowed + 1
    assert not budget.try_spend()


def test_window_expiry_restores_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls and retries older than window_s stop counting."""
    now = [100.0]
    monkeypatch.setattr(retry_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    budget = RetryBudget(ratio=0.0, window_s=10.0, min_retries=2)
    assert _spend_all(budget) == 2
    now[0] += 5.0
    assert not budget.try_spend()
    now[0] += 6.0
    assert _spend_all(budget) == 2


def test_backoff_is_jittered_within_the_exponential_cap() -> None:
    """backoff_s draws from [0, min(max_s, base_s * 2**(attempt-1))]."""
    rng = random.Random(7)
    for attempt, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (10, 2.0)]:
        draws = [backoff_s(attempt, 0.1, 2.0, rng) for _ in range(200)]
        assert all(0.0 <= d <= cap for d in draws)
        assert max(draws) > cap * 0.5  # full jitter actually reaches towards the cap
