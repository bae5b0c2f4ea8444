"""online.claims and online.claimed_writes: offsets by the block, claims stored with their
verdicts in one statement, repeats of ids claimed before left out unstored."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from engine.stores.database import StoreUnavailable
from engine.stores.pending_texts import PendingText
from engine.stores.review_items import Escalation
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from online.claimed_writes import ClaimedWrites
from online.claims import Claim, ClaimStore, online_position
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.verdict import Verdict
from pipelines.verdict_factory import NO_MODEL, MessageFacts, make_verdict

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class FakePool:
    """``online_messages`` and ``verdicts`` in dicts, answering the statements by their shape.

    A write is one statement: its claims part inserts ``online_messages`` rows and, like
    PostgreSQL, refuses the whole statement (storing nothing) when an id is claimed already.
    """

    def __init__(self, claims: dict[str, tuple[int, datetime]] | None = None) -> None:
        self.claims = dict(claims or {})
        self.verdicts: dict[int, str] = {}
        """Offset -> message id of the verdict rows written."""
        self.sequence = 100
        self.statements: list[str] = []
        self.down = False

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        if self.down:
            raise OSError("connection refused")
        if "nextval" in query:
            self.statements.append("reserve")
            first, self.sequence = self.sequence, self.sequence + args[0]
            return [{"source_offset": o} for o in range(first, self.sequence)]
        self.statements.append("claimed")
        return [
            {"message_id": m, "source_offset": self.claims[m][0], "sent_at": self.claims[m][1]}
            for m in args[0]
            if m in self.claims
        ]

    async def execute(self, query: str, *args: Any) -> str:
        self.statements.append("write")
        claims: list[tuple[str, int, datetime]] = []
        if "INSERT INTO online_messages" in query:
            claims = list(zip(args[0], args[1], args[2], strict=True))
            taken = [m for m, _, _ in claims if m in self.claims]
            if taken or len({m for m, _, _ in claims}) < len(claims):
                error = asyncpg.UniqueViolationError("duplicate key value")
                error.constraint_name = "online_messages_pkey"
                raise error
            verdict_args = args[3:]
        else:
            verdict_args = args
        for message_id, offset, sent_at in claims:
            self.claims[message_id] = (offset, sent_at)
        # the verdicts part: $3 offsets, $5 message ids (engine.stores.arrays.verdict_arrays)
        for offset, message_id in zip(verdict_args[2], verdict_args[4], strict=True):
            self.verdicts.setdefault(offset, message_id)
        return "INSERT"


class FakeDatabase:
    def __init__(self, pool: FakePool) -> None:
        self._pool = pool

    def pool(self) -> FakePool:
        return self._pool


def _claims(pool: FakePool, **kwargs: Any) -> ClaimStore:
    return ClaimStore(FakeDatabase(pool), **kwargs)  # type: ignore[arg-type]


def _writes(pool: FakePool, claims: ClaimStore) -> ClaimedWrites:
    verdicts = VerdictBatchStore(FakeDatabase(pool), "online")  # type: ignore[arg-type]
    return ClaimedWrites(verdicts, claims)


def _verdict(offset: int, message_id: str, sent_at: datetime = T0) -> Verdict:
    message = ChatMessage(message_id, "g-1", "u-1", "hello there", sent_at)
    facts = MessageFacts.of(online_position(offset), message)
    return make_verdict(facts, RuleOutcome(), None, PolicyThresholds(), NO_MODEL, queue_ms=0.0)


def _batch(*verdicts: Verdict) -> VerdictBatch:
    return VerdictBatch(
        list(verdicts),
        [Escalation(v, "hello there") for v in verdicts],
        pending_texts=[PendingText(v.position, v.sent_at, "hello there") for v in verdicts],
    )


async def test_offsets_come_in_blocks_one_statement_each() -> None:
    """Five reservations with blocks of two: three statements, five distinct offsets."""
    pool = FakePool()
    claims = _claims(pool, reserve_block=2)
    positions = [await claims.reserve() for _ in range(5)]
    assert [p.offset for p in positions] == [100, 101, 102, 103, 104]
    assert {(p.topic, p.partition) for p in positions} == {("online", 0)}
    assert pool.statements == ["reserve"] * 3


async def test_concurrent_reservations_share_one_block() -> None:
    """Calls that find the reserve empty together wait for one statement, not one each."""
    pool = FakePool()
    claims = _claims(pool, reserve_block=8)
    positions = await asyncio.gather(*(claims.reserve() for _ in range(8)))
    assert len({p.offset for p in positions}) == 8
    assert pool.statements == ["reserve"]


async def test_an_unreachable_database_makes_reserve_unavailable() -> None:
    pool = FakePool()
    pool.down = True
    with pytest.raises(StoreUnavailable):
        await _claims(pool).reserve()


async def test_recent_claims_are_bounded_and_forget_the_oldest_first() -> None:
    """Past ``recent_items`` the claim noted longest ago goes; noting one again renews it."""
    claims = _claims(FakePool(), recent_items=2)
    claims.remember([("a", Claim(online_position(1), T0)), ("b", Claim(online_position(2), T0))])
    claims.remember([("a", Claim(online_position(1), T0))])
    claims.remember([("c", Claim(online_position(3), T0))])
    assert claims.recent("b") is None
    assert claims.recent("a") == Claim(online_position(1), T0)
    assert claims.recent("c") is not None


async def test_claimed_reads_stored_claims_and_remembers_them() -> None:
    earlier = T0 - timedelta(minutes=1)
    pool = FakePool({"old": (7, earlier)})
    claims = _claims(pool)
    found = await claims.claimed(["old", "never"])
    assert found == {"old": Claim(online_position(7), earlier)}
    assert claims.recent("old") == found["old"]


async def test_a_batch_is_written_with_its_claims_in_one_statement() -> None:
    """No repeat among them: one statement stores the claims and the verdicts, and the claims
    are known afterwards without a query."""
    pool = FakePool()
    claims = _claims(pool)
    batch = _batch(_verdict(1, "b"), _verdict(2, "a"))
    stored = await _writes(pool, claims).write(batch)
    assert pool.statements == ["write"]
    assert [v.position.offset for v in stored.verdicts] == [1, 2]
    assert pool.claims == {"a": (2, T0), "b": (1, T0)}
    assert pool.verdicts == {1: "b", 2: "a"}
    assert claims.recent("b") == Claim(online_position(1), T0)


async def test_a_repeat_of_an_id_claimed_before_is_left_out_unstored() -> None:
    """The claimed id refuses the first statement; the claims are read and the rest written:
    the repeat's verdict, escalation and pending text are not stored, the others are."""
    pool = FakePool({"seen": (7, T0)})
    claims = _claims(pool)
    batch = _batch(_verdict(1, "new"), _verdict(2, "seen"))
    stored = await _writes(pool, claims).write(batch)
    assert pool.statements == ["write", "claimed", "write"]
    assert [v.message_id for v in stored.verdicts] == ["new"]
    assert [e.verdict.message_id for e in stored.escalations] == ["new"]
    assert [p.position.offset for p in stored.pending_texts] == [1]
    assert pool.verdicts == {1: "new"}
    assert pool.claims["seen"] == (7, T0)


async def test_a_verdict_decided_again_at_its_own_claim_is_written_without_a_new_claim() -> None:
    """A claim without its row, decided again at the claimed offset: stored there."""
    pool = FakePool({"orphan": (7, T0)})
    stored = await _writes(pool, _claims(pool)).write(_batch(_verdict(7, "orphan")))
    assert [v.position.offset for v in stored.verdicts] == [7]
    assert pool.verdicts == {7: "orphan"}


async def test_one_id_twice_in_a_batch_is_stored_once() -> None:
    """The second verdict of an id in the same batch is a repeat: left out."""
    pool = FakePool()
    stored = await _writes(pool, _claims(pool)).write(_batch(_verdict(1, "m"), _verdict(2, "m")))
    assert [v.position.offset for v in stored.verdicts] == [1]
    assert pool.claims == {"m": (1, T0)}
    assert pool.statements == ["write"]


async def test_stream_coordinates_are_not_claimed() -> None:
    """Only online verdicts carry claims (the store is the online service's)."""
    pool = FakePool()
    message = ChatMessage("k-1", "g-1", "u-1", "hello", T0)
    facts = MessageFacts.of(SourcePosition("chat.messages", 0, 5), message)
    verdict = make_verdict(facts, RuleOutcome(), None, PolicyThresholds(), NO_MODEL, queue_ms=0.0)
    stored = await _writes(pool, _claims(pool)).write(VerdictBatch([verdict]))
    assert [v.message_id for v in stored.verdicts] == ["k-1"]
    assert pool.claims == {}
