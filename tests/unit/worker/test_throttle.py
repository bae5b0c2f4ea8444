"""The rescan's token bucket, on a fake clock: the average rate holds whatever the batch size."""

from __future__ import annotations

import pytest

from worker.throttle import TokenBucket


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_a_burst_is_free_then_the_rate_holds() -> None:
    clock = _Clock()
    bucket = TokenBucket(100.0, burst=100.0, clock=clock, sleep=clock.sleep)
    await bucket.take(100)
    assert clock.now == 0.0
    for _ in range(10):
        await bucket.take(50)
    assert clock.now == pytest.approx(5.0)  # 500 more items at 100/s
    assert bucket.waited_s == pytest.approx(5.0)


async def test_a_batch_larger_than_the_burst_goes_into_debt_and_the_average_holds() -> None:
    clock = _Clock()
    bucket = TokenBucket(10.0, burst=10.0, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        await bucket.take(40)
    # A batch starts once everything taken before it, less the free first burst, plus a burst
    # of its own is paid for at 10/s: the 100th after (99 * 40 - 10 + 10) / 10 s.
    assert clock.now == pytest.approx((99 * 40 - 10 + 10) / 10.0)


async def test_idle_time_refills_at_most_one_burst() -> None:
    clock = _Clock()
    bucket = TokenBucket(10.0, burst=20.0, clock=clock, sleep=clock.sleep)
    await bucket.take(20)
    clock.now += 3600.0
    await bucket.take(20)
    assert clock.slept == []
    await bucket.take(10)
    assert clock.slept == [pytest.approx(1.0)]


async def test_nothing_to_take_never_waits() -> None:
    clock = _Clock()
    bucket = TokenBucket(1.0, clock=clock, sleep=clock.sleep)
    await bucket.take(1)
    await bucket.take(0)
    assert clock.slept == []


@pytest.mark.parametrize(("rate", "burst"), [(0.0, None), (-1.0, None), (1.0, 0.0)])
def test_a_rate_or_burst_that_is_not_positive_is_refused(rate: float, burst: float | None) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        TokenBucket(rate, burst)
