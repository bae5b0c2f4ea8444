"""The words that moved the model (engine.attribution), through the batch processor."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson

from engine.batcher import Batch
from engine.inference import InferenceResult, InferenceUnavailable
from engine.metrics import Metrics
from engine.offsets import OffsetTracker
from engine.policy_stage import PolicyStage
from engine.processing import BatchProcessor
from engine.work import Work
from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage, SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy
from tests.unit.engine.test_processing import (
    SENT_AT,
    TOPIC,
    VERDICT_TOPIC,
    FakeCommitter,
    FakePublisher,
    FakeStore,
)

HATEFUL = ModelScores((0.8, 0.1, 0.1), (1.0, 0.0, 0.0, 0.0), (0.05, 0.05, 0.9))
CALM = ModelScores((0.1, 0.8, 0.1), (1.0, 0.0, 0.0, 0.0), (0.98, 0.01, 0.01))


class WordModel:
    """Hateful while the text has the word ``fuck``, calm otherwise; the calls it got; fails
    the calls whose index is in ``fail_calls``."""

    def __init__(self, fail_calls: frozenset[int] = frozenset()) -> None:
        self.calls: list[list[str]] = []
        self.fail_calls = fail_calls

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        self.calls.append(list(texts))
        if len(self.calls) - 1 in self.fail_calls:
            raise InferenceUnavailable("deadline exceeded")
        rows = [HATEFUL if "fuck" in text.split() else CALM for text in texts]
        return InferenceResult(rows, "moderation", "7", 4.0)


def _rig(model: WordModel, metrics: Metrics) -> tuple[BatchProcessor, OffsetTracker, FakeStore]:
    events: list[str] = []
    tracker = OffsetTracker()
    store = FakeStore(events)
    processor = BatchProcessor(
        inference=model,
        store=store,
        outbox=store,
        publisher=FakePublisher(events),
        acknowledger=FakeCommitter(events, store, tracker),
        positions=tracker,
        policy=PolicyStage(PolicyThresholds()),
        verdict_topic=VERDICT_TOPIC,
        metrics=metrics,
        give_up=asyncio.Event(),
    )
    return processor, tracker, store


def _work(
    tracker: OffsetTracker, offset: int, text: str, outcome: RuleOutcome | None = None
) -> Work:
    tracker.start((TOPIC, 0), offset)
    message = ChatMessage(f"m-{offset}", "g1", "u1", text, SENT_AT)
    return Work(
        SourcePosition(TOPIC, 0, offset),
        b"g1",
        0.0,
        message=message,
        outcome=outcome or RuleOutcome(),
        model_text=canonicalize(text).text,
    )


def _count(metrics: Metrics, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "modstream_model_attribution_total", {"outcome": outcome}
    )
    return 0.0 if value is None else float(value)


async def test_an_escalated_model_verdict_carries_the_raw_span_of_the_word_that_moved_it() -> None:
    model, metrics = WordModel(), Metrics()
    processor, tracker, store = _rig(model, metrics)
    works = [_work(tracker, 0, "well f.u.c.k y0u"), _work(tracker, 1, "hello there")]
    await processor.process_model_batch(Batch(works, 0.0, "full"))
    # The batch, then one call with the variants of the one escalation (its three words).
    assert [len(call) for call in model.calls] == [2, 3]
    [stored] = store.stored
    hateful, calm = stored.verdicts
    assert hateful.result.escalate
    assert hateful.result.decided_by is DecidedBy.MODEL
    assert hateful.model_spans is not None
    assert hateful.model_spans.output == "toxicity.hate"
    [span] = hateful.model_spans.spans
    assert (span.start, span.end) == (5, 12)  # "f.u.c.k" in the raw text
    assert span.drop > 0.8
    assert calm.model_spans is None
    assert _count(metrics, "attributed") == 1


async def test_the_published_verdict_carries_offsets_and_never_the_text() -> None:
    model = WordModel()
    processor, tracker, _ = _rig(model, Metrics())
    publisher = processor._publisher
    assert isinstance(publisher, FakePublisher)
    await processor.process_model_batch(Batch([_work(tracker, 0, "well f.u.c.k y0u")], 0.0, "full"))
    [(_, _, value)] = publisher.records
    record = orjson.loads(value)
    assert record["model_spans"]["output"] == "toxicity.hate"
    assert record["model_spans"]["spans"][0]["span"] == [5, 12]
    assert b"f.u.c.k" not in value
    assert b"fuck" not in value


async def test_a_failed_extra_call_stores_the_verdict_without_attribution() -> None:
    model, metrics = WordModel(fail_calls=frozenset({1})), Metrics()
    processor, tracker, store = _rig(model, metrics)
    await processor.process_model_batch(Batch([_work(tracker, 0, "well f.u.c.k y0u")], 0.0, "full"))
    [stored] = store.stored
    [verdict] = stored.verdicts
    assert verdict.result.escalate
    assert verdict.model_spans is None
    assert len(stored.escalations) == 1
    assert _count(metrics, "failed") == 1
    assert _count(metrics, "attributed") == 0


async def test_a_rule_escalation_without_model_escalation_makes_no_extra_call() -> None:
    model, metrics = WordModel(), Metrics()
    processor, tracker, store = _rig(model, metrics)
    hit = RuleHit("en.threat.1", "threat", Severity.MEDIUM, RuleAction.ESCALATE)
    work = _work(tracker, 0, "see you tomorrow", RuleOutcome((hit,)))
    await processor.process_model_batch(Batch([work], 0.0, "full"))
    [verdict] = store.stored[0].verdicts
    assert verdict.result.escalate
    assert verdict.model_spans is None
    assert len(model.calls) == 1


async def test_escalations_past_the_variant_bound_are_skipped_and_counted() -> None:
    from engine.attribution import attribute_escalations

    model, metrics = WordModel(), Metrics()
    processor, tracker, store = _rig(model, metrics)
    processor._attribute = False
    texts = ["well f.u.c.k y0u", "fuck that and this"]
    works = [_work(tracker, i, text) for i, text in enumerate(texts)]
    await processor.process_model_batch(Batch(works, 0.0, "full"))
    verdicts = store.stored[0].verdicts
    assert all(v.model_spans is None for v in verdicts)
    attributed = await attribute_escalations(
        model, verdicts, texts, [canonicalize(t).text for t in texts], metrics, max_variants=3
    )
    assert len(model.calls[-1]) == 3  # the first escalation's three words only
    assert attributed[0].model_spans is not None
    assert attributed[1].model_spans is None
    assert _count(metrics, "skipped") == 1
