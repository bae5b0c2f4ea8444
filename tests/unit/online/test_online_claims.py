"""online.claims: concurrent claims made in one statement; repeats and earlier claims not fresh."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from online.claims import ClaimStore

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class FakePool:
    """``online_messages`` in a dict, answering the two claim statements by their shape."""

    def __init__(self, existing: dict[str, tuple[int, datetime]] | None = None) -> None:
        self.rows = dict(existing or {})
        self.next_offset = 100
        self.statements: list[tuple[str, list[Any]]] = []

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        self.statements.append(("insert" if "INSERT" in query else "select", list(args[0])))
        if "INSERT" in query:
            made = []
            for message_id, sent_at in zip(args[0], args[1], strict=True):
                if message_id not in self.rows:
                    self.rows[message_id] = (self.next_offset, sent_at)
                    self.next_offset += 1
                    made.append(self._row(message_id))
            return made
        return [self._row(m) for m in args[0] if m in self.rows]

    def _row(self, message_id: str) -> dict[str, Any]:
        offset, sent_at = self.rows[message_id]
        return {"message_id": message_id, "source_offset": offset, "sent_at": sent_at}


class FakeDatabase:
    def __init__(self, pool: FakePool) -> None:
        self._pool = pool

    def pool(self) -> FakePool:
        return self._pool


def store(pool: FakePool) -> ClaimStore:
    return ClaimStore(FakeDatabase(pool), max_items=50, max_in_flight=1)  # type: ignore[arg-type]


async def test_concurrent_claims_are_one_insert_in_sorted_order() -> None:
    pool = FakePool()
    claims = await asyncio.gather(*(store(pool).claim(m, T0) for m in ["c", "a", "b"]))
    assert [c.fresh for c in claims] == [True, True, True]
    assert len({c.position.offset for c in claims}) == 3
    one = store(pool)
    pool.statements.clear()
    await asyncio.gather(one.claim("z", T0), one.claim("y", T0), one.claim("x", T0))
    assert pool.statements == [("insert", ["x", "y", "z"])]


async def test_an_id_asked_twice_in_a_group_is_fresh_once_with_one_position() -> None:
    pool = FakePool()
    first, again = await store(pool).claim_many([("m", T0), ("m", T0 + timedelta(seconds=5))])
    assert first.fresh
    assert not again.fresh
    assert first.position == again.position
    assert again.sent_at == T0  # the first call's sent_at keys the row


async def test_ids_claimed_before_are_read_back_not_fresh() -> None:
    earlier = T0 - timedelta(minutes=1)
    pool = FakePool({"old": (7, earlier)})
    new, old = await store(pool).claim_many([("new", T0), ("old", T0)])
    assert new.fresh
    assert not old.fresh
    assert old.position.offset == 7
    assert old.sent_at == earlier
    assert pool.statements == [("insert", ["new", "old"]), ("select", ["old"])]


async def test_all_fresh_needs_no_read_back() -> None:
    pool = FakePool()
    await store(pool).claim_many([("a", T0), ("b", T0)])
    assert [kind for kind, _ in pool.statements] == ["insert"]
