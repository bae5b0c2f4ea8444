"""online.collector: concurrent checks coalesce into one model call; rules never wait for it."""

from __future__ import annotations

import asyncio
import time

import pytest

from online.collector import Collector
from online.errors import NotDecided
from pipelines.verdict import DecidedBy
from tests.unit.online.online_fakes import (
    SPAM,
    FakeModel,
    FakePublisher,
    FakeStore,
    make_collector,
    work,
)


@pytest.fixture
def parts() -> tuple[FakeModel, FakeStore, FakePublisher]:
    return FakeModel(delay_s=0.02), FakeStore(), FakePublisher()


async def _running(collector: Collector) -> asyncio.Task[None]:
    return asyncio.create_task(collector.run())


async def _stop(collector: Collector, task: asyncio.Task[None]) -> None:
    await collector.close()
    await asyncio.wait_for(task, 5)


async def test_concurrent_checks_share_one_model_request_of_at_most_max_items(
    parts: tuple[FakeModel, FakeStore, FakePublisher],
) -> None:
    """Ten checks submitted while the model is busy are answered by batches of <= 4 texts."""
    model, store, publisher = parts
    collector = make_collector(model, store, publisher, max_items=4, max_wait_s=0.05)
    task = await _running(collector)
    far = time.monotonic() + 10
    answers = [await collector.submit(work(i, f"hello number {i}"), far) for i in range(10)]
    verdicts = await asyncio.gather(*answers)
    await _stop(collector, task)
    assert {v.result.decided_by for v in verdicts} == {DecidedBy.MODEL}
    assert sum(len(c) for c in model.calls) == 10
    assert max(len(c) for c in model.calls) <= 4
    assert len(model.calls) < 10  # coalesced, not one call per check
    assert collector.stats.mean_model_batch > 1
    assert len(publisher.records) == 10  # published after the write
    assert sorted(p.offset for p in store.published) == list(range(10))


async def test_rule_blocks_are_answered_without_waiting_for_a_slow_model(
    parts: tuple[FakeModel, FakeStore, FakePublisher],
) -> None:
    """A rule block submitted while a model call takes 0.5 s is durable well before it ends."""
    model, store, publisher = parts
    model.delay_s = 0.5
    collector = make_collector(model, store, publisher)
    task = await _running(collector)
    far = time.monotonic() + 10
    slow = await collector.submit(work(1, "hello there"), far)
    await asyncio.sleep(0.01)
    started = time.monotonic()
    blocked = await (await collector.submit(work(2, SPAM), far))
    waited = time.monotonic() - started
    await slow
    await _stop(collector, task)
    assert blocked.result.decided_by is DecidedBy.RULES
    assert waited < 0.25
    assert model.calls == [["hello there"]]


async def test_a_spent_budget_gives_the_rules_only_verdict_and_keeps_the_text(
    parts: tuple[FakeModel, FakeStore, FakePublisher],
) -> None:
    """A model slower than the budget yields pending_model, with its text kept for re-scoring."""
    model, store, publisher = parts
    model.delay_s = 0.5
    collector = make_collector(model, store, publisher)
    task = await _running(collector)
    started = time.monotonic()
    verdict = await (await collector.submit(work(1, "hello there"), time.monotonic() + 0.05))
    took = time.monotonic() - started
    await _stop(collector, task)
    assert verdict.result.decided_by is DecidedBy.PENDING_MODEL
    assert took < 0.3
    pending = [p for b in store.batches for p in b.pending_texts]
    assert [p.text for p in pending] == ["hello there"]


async def test_with_the_breaker_open_no_model_call_is_made(
    parts: tuple[FakeModel, FakeStore, FakePublisher],
) -> None:
    """While the model is not usable, checks skip the collector's model batcher entirely."""
    model, store, publisher = parts
    collector = make_collector(model, store, publisher, model_usable=False)
    task = await _running(collector)
    verdict = await (await collector.submit(work(1, "hello there"), time.monotonic() + 10))
    await _stop(collector, task)
    assert verdict.result.decided_by is DecidedBy.PENDING_MODEL
    assert model.calls == []


async def test_a_row_postgres_refuses_fails_its_check_with_not_decided(
    parts: tuple[FakeModel, FakeStore, FakePublisher],
) -> None:
    """A verdict the store rejects fails its own future; the rest of the batch is answered."""
    model, store, publisher = parts
    collector = make_collector(model, store, publisher, model_usable=False)
    task = await _running(collector)
    far = time.monotonic() + 10
    bad = await collector.submit(work(1, "hello there", message_id="bad-1"), far)
    good = await collector.submit(work(2, "hello again"), far)
    assert (await good).message_id == "m-2"
    with pytest.raises(NotDecided):
        await bad
    await _stop(collector, task)
