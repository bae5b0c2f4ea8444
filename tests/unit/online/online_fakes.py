"""Fakes for the online unit tests: a model, a store and a publisher behind a real processor."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from common.publishing import PublishedMarker
from engine.inference import InferenceResult, InferenceUnavailable
from engine.metrics import Metrics
from engine.policy_stage import PolicyStage
from engine.processing import BatchProcessor, BatchStore
from engine.rule_stage import RuleStage
from engine.stores.database import StoreError
from engine.stores.verdict_batches import VerdictBatch
from engine.work import Work
from online.answers import PendingAnswers
from online.budget import BudgetedInference
from online.collector import Collector, Processor
from online.metrics import ObservedProcessor, OnlineMetrics
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.scores import ModelScores
from pipelines.verdict_codec import VerdictRowKey

__all__ = [
    "CALM",
    "ENGINE",
    "RULES",
    "SENT_AT",
    "SPAM",
    "FakeModel",
    "FakePublisher",
    "FakeStore",
    "Store",
    "make_collector",
    "work",
]

CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))
SENT_AT = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
ENGINE = RuleEngine(default_ruleset())
RULES = RuleStage(ENGINE, Metrics())
SPAM = "FREE MONEY!!! click http://win-prizes.example.com now to claim your reward"


class FakeModel:
    """Scores every text CALM after ``delay_s``; ``down`` raises; records each call's texts."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.down = False
        self.calls: list[list[str]] = []

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        self.calls.append(list(texts))
        if self.down:
            raise InferenceUnavailable("circuit breaker open")
        await asyncio.sleep(self.delay_s)
        return InferenceResult([CALM] * len(texts), "moderation", "1", self.delay_s * 1000)


class FakeStore:
    """Keeps written batches; rejects rows whose message id contains ``bad``."""

    def __init__(self) -> None:
        self.batches: list[VerdictBatch] = []
        self.published: list[SourcePosition] = []

    async def write(self, batch: VerdictBatch) -> None:
        if any("bad" in v.message_id for v in batch.verdicts):
            raise StoreError("write rejected: 22P05")
        self.batches.append(batch)

    async def mark_published(self, keys: Sequence[tuple[SourcePosition, datetime]]) -> None:
        self.published.extend(position for position, _ in keys)


class FakePublisher:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes]] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.records.extend((topic, k, v) for k, v in records)

    async def dead_letter(
        self,
        value: bytes | None,
        key: bytes | None,
        position: SourcePosition,
        reason_code: str,
        reason: str,
    ) -> None:
        return None


class Store(BatchStore, PublishedMarker[VerdictRowKey], Protocol):
    """What the processor needs of a store: batch writes, and marks of what was published."""


def make_collector(
    model: FakeModel,
    store: Store,
    publisher: FakePublisher,
    *,
    max_items: int = 8,
    max_wait_s: float = 0.05,
    model_usable: bool = True,
    min_model_s: float = 0.0,
    metrics: OnlineMetrics | None = None,
) -> Collector:
    """A collector over the daemon's real BatchProcessor with the fakes above, wired as
    ``online.parts`` wires it: the answers are its acknowledger, and it has no offsets; given
    ``metrics``, observed by them as the service's are."""
    answers = PendingAnswers()
    on_spent = metrics.budget_missed("inference") if metrics else None
    processor = BatchProcessor(
        inference=BudgetedInference(model, on_spent),
        store=store,
        outbox=store,
        publisher=publisher,
        acknowledger=answers,
        positions=None,
        policy=PolicyStage(PolicyThresholds()),
        verdict_topic="moderation.verdicts",
        metrics=Metrics(),
        give_up=asyncio.Event(),
    )
    observed: Processor = processor if metrics is None else ObservedProcessor(processor, metrics)
    return Collector(
        answers=answers,
        processor=observed,
        max_items=max_items,
        max_wait_s=max_wait_s,
        max_in_flight=2,
        queue_items=100,
        min_model_s=min_model_s,
        model_usable=lambda: model_usable,
        on_budget_spent=metrics.budget_missed("queued") if metrics else None,
    )


def work(offset: int, text: str, message_id: str | None = None) -> Work:
    """A decoded, rule-evaluated record at online coordinates (through the rule stage)."""
    message = ChatMessage(message_id or f"m-{offset}", "g-1", "u-1", text, SENT_AT)
    position = SourcePosition("online", 0, offset)
    outcome, model_text = RULES.evaluate(message)
    return Work(position, None, 0.0, message=message, outcome=outcome, model_text=model_text)
