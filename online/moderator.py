"""One online check, from a decoded message to a durable verdict (or the one stored before).

:meth:`OnlineModerator.check` admits the message into the bounded queue (full: ``Overloaded``),
claims its coordinates (``online.claims``), enriches it with the sender's strikes and runs the
rule stage exactly as the stream's consume loop does (one canonical text, which the model then
scores), then hands it to the collector and waits for its durable verdict. A message id seen
before is answered with the stored verdict: from the call deciding it in this process, from its
row, or, when its first call vanished without a row, by deciding it again at the same
coordinates (the insert is idempotent) and reading the row back.

The claim and the sender's strikes are looked up together with those of the other calls of the
moment (``online.coalesce``): one query each for a group of calls, not one per call.

Time: the caller's deadline bounds everything. The model gets at most ``model_budget_ms`` from
arrival and never more than the deadline minus ``write_reserve_ms``; past that the message gets
the rules-only ``pending_model`` verdict and waits for the re-scorer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from online.claims import Claim
from online.coalesce import Coalescer
from online.collector import Collector
from online.errors import Overloaded, StoreDown
from online.settings import OnlineSection
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.verdict import Verdict
from pipelines.verdict_codec import verdict_from_row
from worker.rule_stage import RuleStage
from worker.sender_strikes import StrikeCache
from worker.stores.database import StoreUnavailable
from worker.work import Work

__all__ = ["Answer", "ClaimReader", "Latency", "OnlineModerator"]


class ClaimReader(Protocol):
    async def claim(self, message_id: str, sent_at: datetime) -> Claim: ...

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


class OnlineModerator:
    def __init__(
        self,
        *,
        collector: Collector,
        claims: ClaimReader,
        rules: RuleStage,
        strikes: StrikeCache | None,
        settings: OnlineSection,
    ) -> None:
        self._collector = collector
        self._claims = claims
        self._rules = rules
        self._strikes = strikes
        self._prefetch: Coalescer[str, None] = Coalescer(
            self._prefetch_many, max_items=256, max_in_flight=1
        )
        self._settings = settings
        self._admitted = 0
        self._deciding: dict[str, asyncio.Future[Verdict]] = {}

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
        deciding = self._deciding.get(message.message_id)
        if deciding is not None:
            return _replayed_verdict(await asyncio.shield(deciding), started)
        try:
            claim = await self._claims.claim(message.message_id, message.sent_at)
        except StoreUnavailable as exc:
            raise StoreDown("PostgreSQL is unavailable") from exc
        if claim.fresh:
            return await self._decide(message, claim.position, started, deadline)
        return await self._replay(message, claim, started, deadline)

    async def _decide(
        self, message: ChatMessage, position: SourcePosition, started: float, deadline: float
    ) -> Answer:
        if self._strikes is not None:
            if not self._strikes.fresh(message.sender_id):
                await self._prefetch(message.sender_id)
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
        self._deciding[message.message_id] = answer
        answer.add_done_callback(lambda _: self._forget(message.message_id, answer))
        verdict = await asyncio.shield(answer)
        finished = time.monotonic()
        return Answer(
            verdict,
            replayed=False,
            latency=Latency(
                rules_ms=(ruled - rules_started) * 1000.0,
                queue_ms=verdict.queue_ms,
                inference_ms=verdict.inference_ms or 0.0,
                total_ms=(finished - started) * 1000.0,
            ),
        )

    async def _prefetch_many(self, sender_ids: Sequence[str]) -> list[None]:
        """Load the strikes of a group of calls' senders (never raises: see ``StrikeCache``)."""
        if self._strikes is not None:
            await self._strikes.prefetch(sender_ids)
        return [None] * len(sender_ids)

    def _forget(self, message_id: str, answer: asyncio.Future[Verdict]) -> None:
        if self._deciding.get(message_id) is answer:
            del self._deciding[message_id]

    async def _replay(
        self, message: ChatMessage, claim: Claim, started: float, deadline: float
    ) -> Answer:
        """A message id claimed before: wait for its verdict, or decide it again if its first
        call left no row within the time that call could have needed."""
        s = self._settings
        wait_until = min(
            started + (s.model_budget_ms + s.write_reserve_ms) / 1000.0,
            deadline - s.write_reserve_ms / 1000.0,
        )
        while True:
            deciding = self._deciding.get(message.message_id)
            if deciding is not None:
                return _replayed_verdict(await asyncio.shield(deciding), started)
            row = await self._stored(claim)
            if row is not None:
                return _replayed_row(row, started)
            if time.monotonic() >= wait_until:
                break
            await asyncio.sleep(s.replay_poll_ms / 1000.0)
        # The first call is gone (crashed, or its write was lost): decide it here, at the same
        # coordinates and with the first call's sent_at, and answer with whatever row won.
        again = dataclasses.replace(message, sent_at=claim.sent_at)
        await self._decide(again, claim.position, started, deadline)
        row = await self._stored(claim)
        if row is None:
            raise StoreDown("the verdict row cannot be read back")
        return _replayed_row(row, started)

    async def _stored(self, claim: Claim) -> Mapping[str, object] | None:
        try:
            return await self._claims.stored_verdict(claim.position, claim.sent_at)
        except StoreUnavailable as exc:
            raise StoreDown("PostgreSQL is unavailable") from exc


def _total(started: float) -> Latency:
    return Latency(total_ms=(time.monotonic() - started) * 1000.0)


def _replayed_verdict(verdict: Verdict, started: float) -> Answer:
    return Answer(verdict, True, _total(started))


def _replayed_row(row: Mapping[str, object], started: float) -> Answer:
    return Answer(verdict_from_row(row), True, _total(started))
