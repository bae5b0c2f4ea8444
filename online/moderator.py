"""One online check, from a decoded message to a durable verdict (or the one stored before).

:meth:`OnlineModerator.check` admits the message into the bounded queue (full: ``Overloaded``),
gives it coordinates of its own (``online.claims``: no round trip), enriches it with the
sender's strikes and runs the rule stage exactly as the stream's consume loop does (one
canonical text, which the model then scores), then hands it to the collector and waits for its
durable verdict. Its message id is claimed by the statement that stores the verdict
(``online.claimed_writes``).

A message id seen before is answered with the stored verdict (``replayed``), unless it was first
checked for another tenant (``MessageIdTaken``: message ids are claimed across tenants, and one
tenant's verdict is never shown to another):

- while a call of this process is deciding it, from that call's verdict;
- when this process stored or read its claim lately (``ClaimStore.recent``), from its row;
- otherwise it is decided like a new one, and the write finds the id claimed: the verdict is
  dropped unstored and the call reads the claim and answers from its row;
- a claim without a row (a first call that claimed under an earlier version of this service and
  vanished) is waited for while its first call could still be deciding, then decided again at
  the claimed coordinates with the first call's ``sent_at`` and read back.

The sender's strikes are looked up together with those of the other calls of the moment
(``online.coalesce``): one query for a group of calls, not one per call. While the processor's
writes are failing for PostgreSQL, new checks are refused at once (``StoreDown``).

Time: the caller's deadline bounds everything. The model gets at most ``model_budget_ms`` from
arrival and never more than the deadline minus ``write_reserve_ms``; past that the message gets
the rules-only ``pending_model`` verdict and waits for the re-scorer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from engine.rule_stage import RuleStage
from engine.sender_strikes import StrikeCache, strike_key
from engine.stores.database import StoreUnavailable
from engine.work import Work
from online.claims import Claim
from online.coalesce import Coalescer
from online.collector import Collector
from online.errors import MessageIdTaken, NotDecided, Overloaded, StoreDown
from online.settings import OnlineSection
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.verdict import Verdict
from pipelines.verdict_codec import verdict_from_row

__all__ = ["Answer", "Claims", "Latency", "OnlineModerator"]


class Claims(Protocol):
    """Coordinates and claims, as the moderator uses them (``online.claims.ClaimStore``)."""

    async def reserve(self) -> SourcePosition: ...

    def recent(self, message_id: str) -> Claim | None: ...

    async def claimed(self, message_ids: Sequence[str]) -> Mapping[str, Claim]: ...

    async def stored_verdict(
        self, position: SourcePosition, sent_at: datetime
    ) -> Mapping[str, object] | None: ...


@dataclass(frozen=True, slots=True)
class Latency:
    """Where one call's time went, in milliseconds."""

    rules_ms: float = 0.0
    queue_ms: float = 0.0
    """Waiting for a batch to close and to run."""
    inference_ms: float = 0.0
    total_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Answer:
    """A check's verdict: the one this call stored, or the one stored for its message id."""

    verdict: Verdict
    replayed: bool
    latency: Latency


def _observe(future: asyncio.Future[Verdict]) -> None:
    """Mark an outcome as seen: no repeat may have waited for it."""
    if not future.cancelled():
        future.exception()


def _forward(source: asyncio.Future[Verdict], target: asyncio.Future[Verdict]) -> None:
    """Complete ``target`` as ``source`` completes (even once the caller has gone)."""

    def copy(done: asyncio.Future[Verdict]) -> None:
        if target.done():
            return
        if done.cancelled():
            target.set_exception(NotDecided("the verdict of the first call was abandoned"))
        elif (error := done.exception()) is not None:
            target.set_exception(error)
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


class OnlineModerator:
    def __init__(
        self,
        *,
        collector: Collector,
        claims: Claims,
        rules: RuleStage,
        strikes: StrikeCache | None,
        settings: OnlineSection,
        store_ok: Callable[[], bool] = lambda: True,
    ) -> None:
        self._collector = collector
        self._claims = claims
        self._rules = rules
        self._strikes = strikes
        self._prefetch: Coalescer[str, None] = Coalescer(
            self._prefetch_many, max_items=256, max_in_flight=1
        )
        self._settings = settings
        self._store_ok = store_ok
        self._admitted = 0
        self._deciding: dict[str, asyncio.Future[Verdict]] = {}
        """Message id -> the verdict its deciding call in this process will get."""

    @property
    def admitted(self) -> int:
        return self._admitted

    @contextmanager
    def admit(self, count: int = 1) -> Iterator[None]:
        """Hold ``count`` places in the bounded queue, or refuse at once with ``Overloaded``."""
        if self._admitted + count > self._settings.queue_limit:
            raise Overloaded(f"queue full ({self._settings.queue_limit} messages in flight)")
        self._admitted += count
        try:
            yield
        finally:
            self._admitted -= count

    def deadline_for(self, time_remaining_s: float | None) -> float:
        """The monotonic deadline of a call with ``time_remaining_s`` left (``None``: no
        deadline given, ``default_deadline_ms`` applies)."""
        remaining = time_remaining_s
        if remaining is None:
            remaining = self._settings.default_deadline_ms / 1000.0
        return time.monotonic() + remaining

    async def check(self, message: ChatMessage, deadline: float) -> Answer:
        """The durable verdict of ``message`` (admitted by the caller; see the module doc)."""
        started = time.monotonic()
        try:
            return await self._check(message, started, deadline)
        except NotDecided:
            # Nothing was stored for this call: a repeat of an id claimed elsewhere meanwhile
            # is answered from the stored row; anything else is the error it is.
            claim = await self._claimed(message.message_id)
            if claim is None:
                raise
            return await self._replay(message, claim, started, deadline)

    async def _check(self, message: ChatMessage, started: float, deadline: float) -> Answer:
        deciding = self._deciding.get(message.message_id)
        if deciding is not None:
            return _replayed_verdict(message, await asyncio.shield(deciding), started)
        claim = self._claims.recent(message.message_id)
        if claim is not None:
            return await self._replay(message, claim, started, deadline)
        if not self._store_ok():
            raise StoreDown("PostgreSQL is unavailable")
        return await self._decide(message, started, deadline)

    async def _decide(
        self, message: ChatMessage, started: float, deadline: float, claim: Claim | None = None
    ) -> Answer:
        """Decide ``message`` at coordinates of its own, or at ``claim``'s (a stored claim
        without its row); repeats arriving meanwhile wait for this call's verdict."""
        message_id = message.message_id
        outcome: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        outcome.add_done_callback(_observe)
        outcome.add_done_callback(lambda _: self._forget(message_id, outcome))
        self._deciding[message_id] = outcome
        try:
            if claim is None:
                position = await self._reserve()
            else:
                position = claim.position
                message = dataclasses.replace(message, sent_at=claim.sent_at)
            answer, rules_ms = await self._submit(message, position, started, deadline)
        except BaseException:
            outcome.set_exception(NotDecided("the first call of this message id stored nothing"))
            raise
        _forward(answer, outcome)
        verdict = await asyncio.shield(answer)
        return Answer(
            verdict,
            replayed=False,
            latency=Latency(
                rules_ms=rules_ms,
                queue_ms=verdict.queue_ms,
                inference_ms=verdict.inference_ms or 0.0,
                total_ms=(time.monotonic() - started) * 1000.0,
            ),
        )

    async def _submit(
        self, message: ChatMessage, position: SourcePosition, started: float, deadline: float
    ) -> tuple[asyncio.Future[Verdict], float]:
        """Strikes, rules, and the collector: the future of the durable verdict, and the
        rules' time in milliseconds."""
        if self._strikes is not None:
            if not self._strikes.fresh(strike_key(message)):
                await self._prefetch(strike_key(message))
            message = self._strikes.enrich(message)
        rules_started = time.monotonic()
        outcome, model_text = self._rules.evaluate(message)
        ruled = time.monotonic()
        work = Work(position, None, ruled, message=message, outcome=outcome, model_text=model_text)
        budget = self._settings
        model_deadline = min(
            started + budget.model_budget_ms / 1000.0, deadline - budget.write_reserve_ms / 1000.0
        )
        answer = await self._collector.submit(work, model_deadline)
        return answer, (ruled - rules_started) * 1000.0

    async def _prefetch_many(self, sender_ids: Sequence[str]) -> list[None]:
        """Load the strikes of a group of calls' senders (never raises: see ``StrikeCache``)."""
        if self._strikes is not None:
            await self._strikes.prefetch(sender_ids)
        return [None] * len(sender_ids)

    def _forget(self, message_id: str, outcome: asyncio.Future[Verdict]) -> None:
        if self._deciding.get(message_id) is outcome:
            del self._deciding[message_id]

    async def _replay(
        self, message: ChatMessage, claim: Claim, started: float, deadline: float
    ) -> Answer:
        """A message id claimed before: answer from its row, or, if its first call left the
        claim without a row within the time that call could have needed, decide it again at
        the claimed coordinates."""
        s = self._settings
        wait_until = min(
            started + (s.model_budget_ms + s.write_reserve_ms) / 1000.0,
            deadline - s.write_reserve_ms / 1000.0,
        )
        while True:
            deciding = self._deciding.get(message.message_id)
            if deciding is not None:
                return _replayed_verdict(message, await asyncio.shield(deciding), started)
            row = await self._stored(claim)
            if row is not None:
                return _replayed_row(message, row, started)
            if time.monotonic() >= wait_until:
                break
            await asyncio.sleep(s.replay_poll_ms / 1000.0)
        # The first call is gone: decide it here, at the claim, and answer with whatever row won.
        await self._decide(message, started, deadline, claim)
        row = await self._stored(claim)
        if row is None:
            raise StoreDown("the verdict row cannot be read back")
        return _replayed_row(message, row, started)

    async def _reserve(self) -> SourcePosition:
        try:
            return await self._claims.reserve()
        except StoreUnavailable as exc:
            raise StoreDown("PostgreSQL is unavailable") from exc

    async def _claimed(self, message_id: str) -> Claim | None:
        try:
            return (await self._claims.claimed([message_id])).get(message_id)
        except StoreUnavailable as exc:
            raise StoreDown("PostgreSQL is unavailable") from exc

    async def _stored(self, claim: Claim) -> Mapping[str, object] | None:
        try:
            return await self._claims.stored_verdict(claim.position, claim.sent_at)
        except StoreUnavailable as exc:
            raise StoreDown("PostgreSQL is unavailable") from exc


def _total(started: float) -> Latency:
    return Latency(total_ms=(time.monotonic() - started) * 1000.0)


def _replayed_verdict(message: ChatMessage, verdict: Verdict, started: float) -> Answer:
    if verdict.tenant != message.tenant:
        # Message ids are claimed across tenants: another tenant's verdict is not the caller's.
        raise MessageIdTaken("message_id was first checked for another tenant")
    return Answer(verdict, True, _total(started))


def _replayed_row(message: ChatMessage, row: Mapping[str, object], started: float) -> Answer:
    return _replayed_verdict(message, verdict_from_row(row), started)
