"""StrikeCache: stored strikes reach the rules through metadata, cached and failure-tolerant."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from engine.sender_strikes import StrikeCache, split_strike_key, strike_key, with_strikes
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset


class FakeSource:
    def __init__(self, totals: dict[str, int], fail: bool = False) -> None:
        self.totals = totals
        self.fail = fail
        self.calls: list[list[str]] = []

    async def sender_strikes(self, sender_ids: Sequence[str]) -> dict[str, int]:
        self.calls.append(list(sender_ids))
        if self.fail:
            raise OSError("database down")
        return {s: self.totals.get(s, 0) for s in sender_ids}


def _message(sender: str, metadata: dict[str, object] | None = None) -> ChatMessage:
    return ChatMessage(
        "m1", "g1", sender, "hello there", datetime(2026, 1, 1, tzinfo=UTC), metadata or {}
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_stored_strikes_make_the_repeat_offender_rule_fire() -> None:
    """A sender with 3 stored strikes gets metadata.sender_strikes=3 and the default rule set's
    repeat-offender rule escalates; a sender without strikes is left untouched."""
    cache = StrikeCache(FakeSource({"bad": 3}))
    await cache.prefetch(["bad", "good"])
    engine = RuleEngine(default_ruleset())
    enriched = cache.enrich(_message("bad"))
    assert enriched.metadata["sender_strikes"] == 3
    assert engine.evaluate(enriched).wants_escalation
    clean = _message("good")
    assert cache.enrich(clean) is clean
    assert not engine.evaluate(clean).wants_escalation


async def test_a_higher_platform_value_is_kept() -> None:
    """When the platform already sent more strikes than are stored, its value stays."""
    cache = StrikeCache(FakeSource({"u": 2}))
    await cache.prefetch(["u"])
    message = _message("u", {"sender_strikes": 5})
    assert cache.enrich(message).metadata["sender_strikes"] == 5


async def test_lookups_are_cached_for_the_ttl_and_batched() -> None:
    """Senders are looked up in one query per prefetch and not again until the TTL passes;
    ``fresh`` says which need no look-up (the online service skips the query for them)."""
    clock = Clock()
    source = FakeSource({"a": 1})
    cache = StrikeCache(source, ttl_s=30.0, clock=clock)
    await cache.prefetch(["a", "b", "a"])
    await cache.prefetch(["a", "b"])
    assert source.calls == [["a", "b"]]
    assert cache.fresh("a")
    assert cache.fresh("b")  # no strikes stored is an answer too
    assert not cache.fresh("c")
    clock.now = 31.0
    assert not cache.fresh("a")
    await cache.prefetch(["b"])
    assert source.calls == [["a", "b"], ["b"]]


async def test_a_failing_lookup_leaves_messages_as_sent() -> None:
    """A database error is swallowed: messages pass through unchanged and nothing is cached."""
    source = FakeSource({"a": 4}, fail=True)
    cache = StrikeCache(source)
    await cache.prefetch(["a"])
    message = _message("a")
    assert cache.enrich(message) is message
    source.fail = False
    await cache.prefetch(["a"])
    assert cache.enrich(message).metadata["sender_strikes"] == 4


def test_with_strikes_raises_the_sent_value_to_a_stored_total() -> None:
    """A rescan's strikes as of a message's time: a higher stored total replaces what was sent;
    none, or a lower one, leaves the message as it is."""
    assert with_strikes(_message("u"), 3).metadata["sender_strikes"] == 3
    clean = _message("u")
    assert with_strikes(clean, 0) is clean
    sent = _message("u", {"sender_strikes": 4})
    assert with_strikes(sent, 3) is sent


def test_a_senders_strikes_are_keyed_within_its_tenant() -> None:
    """The default tenant's sender keys by its id (as before tenants); another tenant's by
    tenant and id, so the same sender id in two tenants is two senders."""
    sent = datetime(2026, 1, 1, tzinfo=UTC)
    plain = ChatMessage("m1", "g1", "u-1", "hi", sent)
    arcade = ChatMessage("m2", "g1", "u-1", "hi", sent, tenant="arcade")
    assert strike_key(plain) == "u-1"
    assert strike_key(arcade) != strike_key(plain)
    assert split_strike_key(strike_key(arcade)) == ("arcade", "u-1")
    assert split_strike_key(strike_key(plain)) == ("default", "u-1")


async def test_strikes_of_one_tenant_do_not_reach_the_same_sender_id_in_another() -> None:
    """A cache fed per strike key enriches only the tenant whose sender has the strikes."""
    sent = datetime(2026, 1, 1, tzinfo=UTC)
    arcade = ChatMessage("m1", "g1", "u-1", "hi", sent, tenant="arcade")
    market = ChatMessage("m2", "g1", "u-1", "hi", sent, tenant="market")
    source = FakeSource({strike_key(arcade): 3})
    cache = StrikeCache(source)
    await cache.prefetch([strike_key(arcade), strike_key(market)])
    assert cache.enrich(arcade).metadata["sender_strikes"] == 3
    assert "sender_strikes" not in cache.enrich(market).metadata
