"""Tests for engine.shadow: the shadow model's decisions are stored, never waited for, and every
message it does not score is counted by reason."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from engine.breaker import BreakerState
from engine.inference import InferenceRejected, InferenceResult, InferenceUnavailable
from engine.metrics import Metrics
from engine.policy_stage import PolicyStage
from engine.shadow import ShadowItem, ShadowScorer
from engine.stores.database import StoreUnavailable
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import Decision, Verdict
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict

SENT_AT = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))
RUDE = ModelScores(
    sentiment=(0.9, 0.1, 0.0), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(0.02, 0.97, 0.01)
)
FLAG_RULE = RuleHit("en.spam.1", "spam", Severity.LOW, RuleAction.FLAG)


def _live(offset: int, hits: tuple[RuleHit, ...] = ()) -> Verdict:
    facts = MessageFacts(
        SourcePosition("chat.messages", 0, offset), f"m-{offset}", "g", "u", SENT_AT, "0" * 64
    )
    run = ModelRun("moderation", "2", "00000000-0000-0000-0000-000000000001", 3.0)
    return make_verdict(facts, RuleOutcome(hits), CALM, PolicyThresholds(), run, queue_ms=1.0)


class FakeInference:
    def __init__(self, scores: ModelScores = RUDE, *, error: Exception | None = None) -> None:
        self.scores = scores
        self.error = error
        self.state = BreakerState.CLOSED
        self.calls: list[list[str]] = []
        self.probes = 0
        self.release = asyncio.Event()
        self.release.set()

    async def start(self, *, wait_ready: bool = True) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def wait_ready(self, timeout_s: float) -> None:
        return None

    async def probe(self) -> bool:
        self.probes += 1
        return self.state is BreakerState.CLOSED

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        self.calls.append(list(texts))
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return InferenceResult([self.scores] * len(texts), "moderation", "1", 4.0)


class FakeStore:
    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.rows: list[Verdict] = []

    async def write(self, verdicts: Sequence[Verdict]) -> None:
        if self.down:
            raise StoreUnavailable("postgres away")
        self.rows.extend(verdicts)


def _scorer(
    inference: FakeInference, store: FakeStore, queue_batches: int = 2
) -> tuple[ShadowScorer, Metrics]:
    metrics = Metrics(CollectorRegistry())
    scorer = ShadowScorer(
        inference=inference,
        store=store,
        policy=PolicyStage(PolicyThresholds()),
        metrics=metrics,
        queue_batches=queue_batches,
    )
    return scorer, metrics


def _items(live: list[Verdict], texts: list[str]) -> list[ShadowItem]:
    return [ShadowItem(v, t) for v, t in zip(live, texts, strict=True)]


def _dropped(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("modstream_shadow_dropped_total", {"reason": reason})
    return float(value or 0.0)


async def test_shadow_verdicts_use_the_live_rule_hits_and_the_same_policy() -> None:
    """Each shadow verdict is the policy over the live rule hits and the shadow's scores, keyed
    like the live verdict and naming the shadow model's version; the texts sent are the live
    model's texts."""
    inference, store = FakeInference(RUDE), FakeStore()
    scorer, metrics = _scorer(inference, store)
    live = [_live(1), _live(2, (FLAG_RULE,))]
    assert await scorer.score(_items(live, ["a", "b"])) == 2
    assert inference.calls == [["a", "b"]]
    assert [v.position for v in store.rows] == [v.position for v in live]
    assert {(v.model_name, v.model_version) for v in store.rows} == {("moderation", "1")}
    assert store.rows[1].rule_hits == (FLAG_RULE,)
    assert all(v.result.decision is Decision.BLOCK for v in store.rows)  # toxic 0.98
    assert [v.result.decision for v in live] == [Decision.ALLOW, Decision.FLAG]
    assert metrics.registry.get_sample_value("modstream_shadow_scored_total") == 2


async def test_submit_never_waits_and_sheds_past_the_queue() -> None:
    """With the queue full, a submitted batch is dropped at once and counted as queue_full;
    nothing is awaited."""
    scorer, metrics = _scorer(FakeInference(), FakeStore(), queue_batches=2)
    for offset in range(3):
        scorer.submit([_live(offset), _live(offset + 10)], ["x", "y"])
    assert scorer.queued == 2
    assert _dropped(metrics, "queue_full") == 2


async def test_no_shadow_call_starts_while_live_work_is_busy() -> None:
    """While the live side says it is busy the queued batch waits (no call); once live has
    room it is scored."""
    inference, store = FakeInference(), FakeStore()
    scorer, _ = _scorer(inference, store)
    busy = True
    scorer.defer_to(lambda: busy)
    done = asyncio.Event()
    task = asyncio.create_task(scorer.run(done))
    scorer.submit([_live(1)], ["x"])
    await asyncio.sleep(0.05)
    assert inference.calls == []
    busy = False
    for _ in range(100):
        if store.rows:
            break
        await asyncio.sleep(0.01)
    assert len(store.rows) == 1
    done.set()
    await asyncio.wait_for(task, 1)


@pytest.mark.parametrize(
    ("error", "reason"),
    [(InferenceUnavailable("down"), "unavailable"), (InferenceRejected("bad"), "rejected")],
)
async def test_a_shadow_model_failure_drops_the_batch_and_counts_it(
    error: Exception, reason: str
) -> None:
    """A shadow model that is away or refuses the texts stores nothing and counts the batch's
    messages under its reason; it raises nothing."""
    store = FakeStore()
    scorer, metrics = _scorer(FakeInference(error=error), store)
    assert await scorer.score(_items([_live(1), _live(2)], ["a", "b"])) == 0
    assert store.rows == []
    assert _dropped(metrics, reason) == 2


async def test_a_store_failure_drops_the_batch_and_counts_it() -> None:
    """PostgreSQL refusing the shadow rows drops them (store_failed), nothing raises."""
    scorer, metrics = _scorer(FakeInference(), FakeStore(down=True))
    assert await scorer.score(_items([_live(1)], ["a"])) == 0
    assert _dropped(metrics, "store_failed") == 1


async def test_an_open_shadow_breaker_is_probed_before_a_call() -> None:
    """A shadow client whose breaker is not closed is probed first (so it can come back)."""
    inference = FakeInference()
    inference.state = BreakerState.HALF_OPEN
    scorer, _ = _scorer(inference, FakeStore())
    await scorer.score(_items([_live(1)], ["a"]))
    assert inference.probes == 1


async def test_a_serving_shadow_pool_is_probed_before_each_call_too() -> None:
    """With the pool closed (some shadow replica serves) each batch still starts with a probe,
    so a single half-open replica comes back and a DNS pool follows its name; the probe makes
    no call unless something is half-open."""
    inference = FakeInference()
    scorer, _ = _scorer(inference, FakeStore())
    await scorer.score(_items([_live(1)], ["a"]))
    await scorer.score(_items([_live(2)], ["b"]))
    assert inference.probes == 2
    assert inference.calls == [["a"], ["b"]]


async def test_what_is_queued_at_shutdown_is_counted() -> None:
    """Stopping the loop drops what is still queued, counted as shutdown."""
    inference = FakeInference()
    inference.release.clear()  # the first batch's call hangs until released
    scorer, metrics = _scorer(inference, FakeStore(), queue_batches=4)
    done = asyncio.Event()
    task = asyncio.create_task(scorer.run(done))
    scorer.submit([_live(1)], ["a"])
    await asyncio.sleep(0.02)
    scorer.submit([_live(2), _live(3)], ["b", "c"])
    done.set()
    inference.release.set()
    await asyncio.wait_for(task, 1)
    assert _dropped(metrics, "shutdown") == 2


async def test_shadow_verdicts_use_each_messages_tenant_thresholds() -> None:
    """The shadow decides a tenant's message with that tenant's thresholds, as the live side
    did: RUDE (toxic 0.98) is blocked by the default and flagged by a tenant whose offensive
    block is 0.99; a tenant without thresholds of its own gets the default's."""
    inference, store = FakeInference(RUDE), FakeStore()
    policy = PolicyStage(PolicyThresholds())
    policy.install_tenant("acme", PolicyThresholds(block_offensive=0.99))
    scorer = ShadowScorer(
        inference=inference,
        store=store,
        policy=policy,
        metrics=Metrics(CollectorRegistry()),
        queue_batches=2,
    )
    live = [_live(1), _live(2), _live(3)]
    items = [
        ShadowItem(v, t, tenant)
        for v, t, tenant in zip(live, ["a", "b", "c"], ["acme", "default", "nobody"], strict=True)
    ]
    assert await scorer.score(items) == 3
    assert [v.result.decision for v in store.rows] == [
        Decision.FLAG,
        Decision.BLOCK,
        Decision.BLOCK,
    ]


async def test_submit_carries_the_tenants_to_the_items() -> None:
    """``submit`` pairs each live verdict with its message's tenant (the default without)."""
    inference, store = FakeInference(RUDE), FakeStore()
    policy = PolicyStage(PolicyThresholds())
    policy.install_tenant("acme", PolicyThresholds(block_offensive=0.99))
    scorer = ShadowScorer(
        inference=inference,
        store=store,
        policy=policy,
        metrics=Metrics(CollectorRegistry()),
        queue_batches=2,
    )
    scorer.submit([_live(1), _live(2)], ["a", "b"], ["acme", "default"])
    scorer.submit([_live(3)], ["c"])
    done = asyncio.Event()
    task = asyncio.create_task(scorer.run(done))
    for _ in range(100):
        if len(store.rows) == 3:
            break
        await asyncio.sleep(0.01)
    done.set()
    await asyncio.wait_for(task, timeout=5)
    assert [v.result.decision for v in store.rows] == [
        Decision.FLAG,
        Decision.BLOCK,
        Decision.BLOCK,
    ]
