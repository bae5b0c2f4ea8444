"""online.moderator: the bounded queue, repeated message ids, and the model's share of time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest

from engine.stores.verdict_batches import VerdictBatch
from online.claims import Claim
from online.collector import Collector
from online.errors import Overloaded, StoreDown
from online.moderator import OnlineModerator
from online.settings import OnlineSection
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.verdict_codec import VERDICT_COLUMNS, verdict_row
from tests.unit.online.online_fakes import (
    RULES,
    SENT_AT,
    FakeModel,
    FakePublisher,
    make_collector,
)


class MemoryClaims:
    """Claims in a dict, offsets from a counter; stored rows read back from the store."""

    def __init__(self) -> None:
        self.claims: dict[str, Claim] = {}
        self.known: dict[str, Claim] = {}
        """The claims this process stored or read (``recent``)."""
        self.store: ClaimingStore | None = None
        self.next_offset = 0

    def claim_elsewhere(self, message_id: str, sent_at: datetime) -> Claim:
        """A claim another process (or an earlier version) stored: not known here."""
        claim = Claim(SourcePosition("online", 0, self.next_offset), sent_at)
        self.next_offset += 1
        self.claims[message_id] = claim
        return claim

    async def reserve(self) -> SourcePosition:
        position = SourcePosition("online", 0, self.next_offset)
        self.next_offset += 1
        return position

    def recent(self, message_id: str) -> Claim | None:
        return self.known.get(message_id)

    async def claimed(self, message_ids: Sequence[str]) -> Mapping[str, Claim]:
        found = {m: self.claims[m] for m in message_ids if m in self.claims}
        self.known.update(found)
        return found

    async def stored_verdict(
        self, position: SourcePosition, sent_at: datetime
    ) -> Mapping[str, object] | None:
        assert self.store is not None
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


class ClaimingStore:
    """Stores verdicts with their claims as ``online.claimed_writes`` does: a verdict of an id
    claimed at other coordinates is left out, the others claim their ids."""

    def __init__(self, claims: MemoryClaims) -> None:
        self.batches: list[VerdictBatch] = []
        self.claims = claims
        claims.store = self

    async def mark_published(self, keys: Sequence[tuple[SourcePosition, datetime]]) -> None:
        return None

    async def write(self, batch: VerdictBatch) -> VerdictBatch:
        kept = []
        for verdict in batch.verdicts:
            claim = self.claims.claims.get(verdict.message_id)
            if claim is not None and claim.position != verdict.position:
                continue
            claim = Claim(verdict.position, verdict.sent_at)
            self.claims.claims[verdict.message_id] = claim
            self.claims.known[verdict.message_id] = claim
            kept.append(verdict)
        stored = VerdictBatch(kept)
        self.batches.append(stored)
        return stored


def _message(message_id: str, text: str = "hello there") -> ChatMessage:
    return ChatMessage(message_id, "g-1", "u-1", text, SENT_AT)


def _build(
    model: FakeModel, **settings: Any
) -> tuple[OnlineModerator, Collector, MemoryClaims, ClaimingStore]:
    claims = MemoryClaims()
    store = ClaimingStore(claims)
    collector = make_collector(model, store, FakePublisher())
    moderator = OnlineModerator(
        collector=collector,
        claims=claims,
        rules=RULES,
        strikes=None,
        settings=OnlineSection(**settings),
    )
    return moderator, collector, claims, store


def _moderator(
    model: FakeModel, **settings: Any
) -> tuple[OnlineModerator, asyncio.Task[None], MemoryClaims, ClaimingStore]:
    moderator, collector, claims, store = _build(model, **settings)
    return moderator, asyncio.create_task(collector.run()), claims, store


def test_the_queue_refuses_past_its_limit_and_frees_places_on_exit() -> None:
    """admit() holds places up to queue_limit, refuses the next at once, and gives them back."""
    moderator, _, _, _ = _build(FakeModel(), queue_limit=3)
    with moderator.admit(2):
        with pytest.raises(Overloaded):
            moderator.admit(2).__enter__()
        with moderator.admit(1):
            assert moderator.admitted == 3
    assert moderator.admitted == 0


async def test_concurrent_repeats_are_decided_once_and_all_get_that_verdict() -> None:
    """Five concurrent checks of one id: one model text, one stored row, four replays."""
    model = FakeModel(delay_s=0.02)
    moderator, task, _, store = _moderator(model)
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
    model = FakeModel()
    moderator, task, _, _ = _moderator(model)
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
    model = FakeModel()
    moderator, task, claims, store = _moderator(model, model_budget_ms=20.0, replay_poll_ms=5.0)
    claims.claim_elsewhere("orphan", SENT_AT)  # a first call that died before storing anything
    answer = await moderator.check(_message("orphan"), time.monotonic() + 5)
    await moderator._collector.close()
    await task
    assert answer.replayed
    assert answer.verdict.position.offset == 0
    assert [v.position.offset for b in store.batches for v in b.verdicts] == [0]


async def test_the_model_budget_never_exceeds_the_deadline_minus_the_write_reserve() -> None:
    """With 60 ms left and 50 ms reserved, a 0.5 s model is cut off: pending_model in time."""
    model = FakeModel(delay_s=0.5)
    moderator, task, _, _ = _moderator(model, model_budget_ms=1000.0, write_reserve_ms=50.0)
    started = time.monotonic()
    answer = await moderator.check(_message("hurry"), started + 0.06)
    took = time.monotonic() - started
    await moderator._collector.close()
    await task
    assert answer.verdict.result.decided_by == "pending_model"
    assert took < 0.2


async def test_a_repeat_decided_on_another_instance_is_answered_from_its_row() -> None:
    """Two services over one claim table: the second, not knowing the id, decides it too; its
    write leaves the repeat out, and it answers with the first one's stored verdict."""
    model = FakeModel()
    one, one_task, claims, store = _moderator(model)
    deadline = time.monotonic() + 5
    first = await one.check(_message("across"), deadline)
    other = MemoryClaims()
    other.claims, other.store, other.next_offset = claims.claims, store, 100
    collector = make_collector(model, store, FakePublisher())
    two = OnlineModerator(
        collector=collector, claims=other, rules=RULES, strikes=None, settings=OnlineSection()
    )
    two_task = asyncio.create_task(collector.run())
    second = await two.check(_message("across", text="other words"), deadline)
    for moderator, task in ((one, one_task), (two, two_task)):
        await moderator._collector.close()
        await task
    assert second.replayed
    assert second.verdict.position == first.verdict.position
    assert second.verdict.result == first.verdict.result
    stored = [v for b in store.batches for v in b.verdicts if v.message_id == "across"]
    assert [v.position.offset for v in stored] == [first.verdict.position.offset]
    assert other.recent("across") == claims.claims["across"]


async def test_new_checks_are_refused_at_once_while_writes_fail() -> None:
    """With the processor's writes failing for PostgreSQL, a new message gets StoreDown
    without reaching the model; a message whose claim is known still replays."""
    model = FakeModel()
    moderator, task, _, _ = _moderator(model)
    known = await moderator.check(_message("known"), time.monotonic() + 5)
    moderator._store_ok = lambda: False
    with pytest.raises(StoreDown):
        await moderator.check(_message("new one"), time.monotonic() + 5)
    again = await moderator.check(_message("known"), time.monotonic() + 5)
    await moderator._collector.close()
    await task
    assert again.replayed
    assert again.verdict.position == known.verdict.position
    assert len(model.calls) == 1
