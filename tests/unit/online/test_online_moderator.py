"""online.moderator: the bounded queue, repeated message ids, and the model's share of time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from online.claims import Claim
from online.collector import Collector
from online.errors import Overloaded
from online.moderator import OnlineModerator
from online.settings import OnlineSection
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.verdict_codec import VERDICT_COLUMNS, verdict_row
from tests.unit.online.online_fakes import (
    RULES,
    SENT_AT,
    FakeModel,
    FakePublisher,
    FakeStore,
    make_collector,
)


class MemoryClaims:
    """Claims in a dict; stored verdicts read back from the fake store's batches."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.claims: dict[str, Claim] = {}
        self.next_offset = 0

    async def claim(self, message_id: str, sent_at: datetime) -> Claim:
        known = self.claims.get(message_id)
        if known is not None:
            return Claim(known.position, known.sent_at, fresh=False)
        claim = Claim(SourcePosition("online", 0, self.next_offset), sent_at, fresh=True)
        self.next_offset += 1
        self.claims[message_id] = claim
        return claim

    async def stored_verdict(
        self, position: SourcePosition, sent_at: datetime
    ) -> Mapping[str, object] | None:
        for batch in self.store.batches:
            for verdict in batch.verdicts:
                if verdict.position == position:
                    row: dict[str, Any] = dict(
                        zip(VERDICT_COLUMNS, verdict_row(verdict), strict=True)
                    )
                    row["reasons"] = list(verdict.result.reasons)
                    row["updated_at"] = SENT_AT
                    return row
        return None


def _message(message_id: str, text: str = "hello there") -> ChatMessage:
    return ChatMessage(message_id, "g-1", "u-1", text, SENT_AT)


def _build(
    model: FakeModel, store: FakeStore, **settings: Any
) -> tuple[OnlineModerator, Collector, MemoryClaims]:
    collector = make_collector(model, store, FakePublisher())
    claims = MemoryClaims(store)
    moderator = OnlineModerator(
        collector=collector,
        claims=claims,
        rules=RULES,
        strikes=None,
        settings=OnlineSection(**settings),
    )
    return moderator, collector, claims


def _moderator(
    model: FakeModel, store: FakeStore, **settings: Any
) -> tuple[OnlineModerator, asyncio.Task[None], MemoryClaims]:
    moderator, collector, claims = _build(model, store, **settings)
    return moderator, asyncio.create_task(collector.run()), claims


def test_the_queue_refuses_past_its_limit_and_frees_places_on_exit() -> None:
    """admit() holds places up to queue_limit, refuses the next at once, and gives them back."""
    moderator, _, _ = _build(FakeModel(), FakeStore(), queue_limit=3)
    with moderator.admit(2):
        with pytest.raises(Overloaded):
            moderator.admit(2).__enter__()
        with moderator.admit(1):
            assert moderator.admitted == 3
    assert moderator.admitted == 0


async def test_concurrent_repeats_are_decided_once_and_all_get_that_verdict() -> None:
    """Five concurrent checks of one id: one model text, one stored row, four replays."""
    model, store = FakeModel(delay_s=0.02), FakeStore()
    moderator, task, _ = _moderator(model, store)
    deadline = time.monotonic() + 5
    answers = await asyncio.gather(*(moderator.check(_message("same"), deadline) for _ in range(5)))
    await moderator._collector.close()
    await task
    assert sum(len(c) for c in model.calls) == 1
    assert sum(len(b.verdicts) for b in store.batches) == 1
    assert sorted(a.replayed for a in answers) == [False, True, True, True, True]
    assert {a.verdict.position.offset for a in answers} == {0}
    assert {a.verdict.result.decided_by for a in answers} == {"model"}


async def test_a_later_repeat_is_answered_from_the_stored_row() -> None:
    """Once the first call is over, a repeat reads the row: same decision, no new model call."""
    model, store = FakeModel(), FakeStore()
    moderator, task, _ = _moderator(model, store)
    deadline = time.monotonic() + 5
    first = await moderator.check(_message("again"), deadline)
    second = await moderator.check(_message("again", text="different words"), deadline)
    await moderator._collector.close()
    await task
    assert not first.replayed
    assert second.replayed
    assert second.verdict.result == first.verdict.result
    assert second.verdict.position == first.verdict.position
    assert len(model.calls) == 1


async def test_a_claim_without_a_row_is_decided_again_at_the_same_coordinates() -> None:
    """If the first call vanished after claiming, a repeat decides it at the claimed offset."""
    model, store = FakeModel(), FakeStore()
    moderator, task, claims = _moderator(model, store, model_budget_ms=20.0, replay_poll_ms=5.0)
    await claims.claim("orphan", SENT_AT)  # a first call that died before storing anything
    answer = await moderator.check(_message("orphan"), time.monotonic() + 5)
    await moderator._collector.close()
    await task
    assert answer.replayed
    assert answer.verdict.position.offset == 0
    assert [v.position.offset for b in store.batches for v in b.verdicts] == [0]


async def test_the_model_budget_never_exceeds_the_deadline_minus_the_write_reserve() -> None:
    """With 60 ms left and 50 ms reserved, a 0.5 s model is cut off: pending_model in time."""
    model, store = FakeModel(delay_s=0.5), FakeStore()
    moderator, task, _ = _moderator(model, store, model_budget_ms=1000.0, write_reserve_ms=50.0)
    started = time.monotonic()
    answer = await moderator.check(_message("hurry"), started + 0.06)
    took = time.monotonic() - started
    await moderator._collector.close()
    await task
    assert answer.verdict.result.decided_by == "pending_model"
    assert took < 0.2
