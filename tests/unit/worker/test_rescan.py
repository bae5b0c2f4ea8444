"""The rescanner over fakes: a verdict a person has is kept (counted, never changed), every
other one is handed over to be updated changed or not, and strikes are those of the send time."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from engine.inference import InferenceResult
from engine.metrics import Metrics
from engine.policy_stage import PolicyStage
from engine.rule_stage import RuleStage
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.layers import load_rule_stack
from pipelines.scores import ModelScores
from pipelines.verdict_codec import VerdictRowKey
from worker.rescan import Rescanner
from worker.rescan_plan import HistoryRecord, OffsetRange, RescanPlan, StoredDecision
from worker.rescan_review import AppliedBatch, Redecided, ReviewState
from worker.throttle import TokenBucket

TOPIC = "chat.messages"
SENT_AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))


class FakeHistory:
    def __init__(self, records: list[HistoryRecord]) -> None:
        self._records = records
        self.finished: set[int] = set()
        self._fetched = False

    async def window(self, since: datetime, until: datetime) -> list[OffsetRange]:
        return [OffsetRange(0, 0, len(self._records))]

    async def log_start(self) -> dict[int, int]:
        return {0: 0}

    def assign(self, ranges: Sequence[OffsetRange]) -> None:
        pass

    @property
    def done(self) -> bool:
        return self._fetched

    async def fetch(self, max_records: int, timeout_ms: int = 1000) -> list[HistoryRecord]:
        self._fetched = True
        self.finished = {0}
        return self._records


class FakeStore:
    """Stored verdicts: every message flagged and escalated; ``held`` offsets are a person's."""

    def __init__(self, held: set[int]) -> None:
        self._held = held
        self.decided: list[Redecided] = []

    async def create(self, plan: RescanPlan) -> None:
        pass

    async def stored(
        self, topic: str, keys: Sequence[tuple[SourcePosition, datetime]]
    ) -> dict[SourcePosition, StoredDecision]:
        return {
            p: StoredDecision(
                "flag",
                True,
                "offensive",
                f"m-{p.offset}",
                ReviewState.HELD if p.offset in self._held else ReviewState.WAITING,
            )
            for p, _ in keys
        }

    async def commit_batch(
        self,
        rescan_id: uuid.UUID,
        *,
        next_offsets: dict[int, int],
        report: Callable[[AppliedBatch], dict[str, Any]],
        decided: Sequence[Redecided] = (),
        model: str = "",
        finished: bool = False,
    ) -> AppliedBatch:
        self.decided.extend(decided)
        held = [d for d in decided if d.verdict.position.offset in self._held]
        free = [d for d in decided if d.verdict.position.offset not in self._held]
        applied = AppliedBatch(
            updated=frozenset(d.verdict.position for d in free if d.changed),
            stamped=len(free),
            kept=len(held),
            kept_differs=sum(d.changed for d in held),
        )
        report(applied)
        return applied

    async def count_expired(self, plan: RescanPlan, gone: Sequence[OffsetRange]) -> int:
        return 0


class FakeStrikes:
    """Strikes per sender as of a moment: ``s-early`` had 3 before ``SENT_AT``."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, datetime]] = []
        self.tenants: list[str] = []

    async def strikes_at(
        self, moments: Sequence[tuple[str, datetime]], tenants: Sequence[str] | None = None
    ) -> list[int]:
        self.asked.extend(moments)
        self.tenants.extend(tenants or ())
        return [3 if sender == "s-early" and at >= SENT_AT else 0 for sender, at in moments]


class FakeInference:
    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        return InferenceResult([CALM] * len(texts), "moderation", "2", 1.0)


class FakePublisher:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes]] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.records.extend(records)


class FakeMarker:
    async def mark_published(self, keys: Sequence[VerdictRowKey]) -> None:
        pass


def _record(offset: int, sender: str) -> HistoryRecord:
    document = {
        "message_id": f"m-{offset}",
        "group_id": "g",
        "sender_id": sender,
        "text": f"good game everyone {offset}",
        "sent_at": (SENT_AT + timedelta(seconds=offset)).isoformat(),
    }
    return HistoryRecord(0, offset, orjson.dumps(document))


def _plan(*, apply: bool) -> RescanPlan:
    return RescanPlan(
        rescan_id=uuid.uuid4(),
        topic=TOPIC,
        group_id=None,
        since=SENT_AT - timedelta(days=1),
        until=SENT_AT + timedelta(days=1),
        model_name="moderation",
        model_version="2",
        apply=apply,
        ranges=(OffsetRange(0, 0, 4),),
        report={},
    )


def _rescanner(
    store: FakeStore, strikes: FakeStrikes, metrics: Metrics, publisher: FakePublisher
) -> Rescanner:
    records = [_record(0, "s-a"), _record(1, "s-b"), _record(2, "s-a"), _record(3, "s-early")]
    return Rescanner(
        history=FakeHistory(records),
        store=store,
        inference=FakeInference(),
        rules=RuleStage(RuleEngine(default_ruleset()), metrics),
        strikes=strikes,
        policy=PolicyStage(PolicyThresholds()),
        publisher=publisher,
        outbox=FakeMarker(),
        verdict_topic="moderation.verdicts",
        throttle=TokenBucket(1e6),
        batch_items=10,
        max_message_bytes=65536,
        metrics=metrics,
    )


def _kept(metrics: Metrics, would: str) -> float:
    value = metrics.registry.get_sample_value("modstream_rescan_kept_total", {"would": would})
    assert value is not None
    return value


@pytest.mark.parametrize("apply", [True, False])
async def test_a_verdict_a_person_has_is_kept_and_every_other_is_handed_over(
    apply: bool,
) -> None:
    """The stored flags were escalated; the model now allows. The two a person has are counted
    as kept (would differ), not as changes, and the kept counter moves only when applied; the
    other two are changes, and with ``apply`` all four go to the store (which keeps the held
    ones as decided), only the two changed free ones are published."""
    store = FakeStore(held={0, 1})
    metrics = Metrics(CollectorRegistry())
    publisher = FakePublisher()
    report = await _rescanner(store, FakeStrikes(), metrics, publisher).run(_plan(apply=apply))
    assert (report.compared, report.kept, report.kept_differs) == (4, 2, 2)
    assert report.changed == 2
    assert report.unchanged == 0
    assert set(report.changes) == {"offensive", "repeat_offender"}  # m-2; m-3 (strikes)
    if apply:
        assert [d.verdict.position.offset for d in store.decided] == [0, 1, 2, 3]
        assert all(d.changed for d in store.decided)
        assert all(d.verdict.model_version == "2" for d in store.decided)
        assert (report.applied, report.stamped) == (2, 2)
        assert (_kept(metrics, "different"), _kept(metrics, "same")) == (2.0, 0.0)
        assert sorted(orjson.loads(v)["message_id"] for _, v in publisher.records) == [
            "m-2",
            "m-3",
        ]
    else:
        assert store.decided == []
        assert (report.applied, report.stamped) == (0, 0)
        assert _kept(metrics, "different") == 0.0
        assert publisher.records == []


async def test_strikes_are_read_as_they_stood_when_each_message_was_sent() -> None:
    """Each message's strikes are asked for at its own sent_at; the sender who had three then
    is escalated by the repeat-offender rule."""
    store = FakeStore(held=set())
    strikes = FakeStrikes()
    metrics = Metrics(CollectorRegistry())
    await _rescanner(store, strikes, metrics, FakePublisher()).run(_plan(apply=True))
    assert strikes.asked == [
        ("s-a", SENT_AT),
        ("s-b", SENT_AT + timedelta(seconds=1)),
        ("s-a", SENT_AT + timedelta(seconds=2)),
        ("s-early", SENT_AT + timedelta(seconds=3)),
    ]
    escalated = {d.verdict.message_id for d in store.decided if d.verdict.result.escalate}
    assert escalated == {"m-3"}
    assert strikes.tenants == ["default"] * 4  # each message's own tenant


_MARKET_LAYER = """extends = "default"

[[rules]]
id = "market.spam.any_link"
category = "spam"
severity = "high"
action = "block"
kind = "regex"
patterns = ['''\\bhttps?://[a-z0-9.-]+\\.[a-z]{2,}''']

[[examples]]
id = "market.spam.any_link"
examples = ["deals at https://gold.example.com today"]
near_misses = ["the deal is on the website, ask in chat"]
"""


async def test_a_message_is_decided_again_under_its_own_tenants_rules(tmp_path: Path) -> None:
    """The same text read back for two tenants: the one whose stack blocks links is blocked by
    its rule, the default tenant's is not; each verdict keeps its tenant."""
    layer = tmp_path / "market.toml"
    layer.write_text(_MARKET_LAYER, encoding="utf-8")
    metrics = Metrics(CollectorRegistry())
    rules = RuleStage(RuleEngine(default_ruleset()), metrics)
    rules.install_tenant("market", RuleEngine(load_rule_stack(layer).ruleset))
    text = "gold at https://gold.example.com"
    records = []
    for offset, tenant in enumerate((None, "market")):
        document: dict[str, Any] = {
            "message_id": f"m-{offset}",
            "group_id": "g",
            "sender_id": "s",
            "text": text,
            "sent_at": (SENT_AT + timedelta(seconds=offset)).isoformat(),
        }
        if tenant is not None:
            document["tenant"] = tenant
        records.append(HistoryRecord(0, offset, orjson.dumps(document)))
    store = FakeStore(held=set())
    strikes = FakeStrikes()
    rescanner = Rescanner(
        history=FakeHistory(records),
        store=store,
        inference=FakeInference(),
        rules=rules,
        strikes=strikes,
        policy=PolicyStage(PolicyThresholds()),
        publisher=FakePublisher(),
        outbox=FakeMarker(),
        verdict_topic="moderation.verdicts",
        throttle=TokenBucket(1e6),
        batch_items=10,
        max_message_bytes=65536,
        metrics=metrics,
    )
    await rescanner.run(_plan(apply=True))
    verdicts = {d.verdict.message_id: d.verdict for d in store.decided}
    assert verdicts["m-1"].tenant == "market"
    assert verdicts["m-1"].result.decision.value == "block"
    assert "market.spam.any_link" in {h.rule_id for h in verdicts["m-1"].rule_hits}
    assert verdicts["m-0"].tenant == "default"
    assert "market.spam.any_link" not in {h.rule_id for h in verdicts["m-0"].rule_hits}
    assert strikes.tenants == ["default", "market"]


async def test_each_message_is_decided_again_with_its_tenants_thresholds() -> None:
    """A rude score (at least offensive 0.98) blocks under the default thresholds and only
    flags for ``acme``, whose offensive block is 0.99: the rescan reads each record's tenant."""
    rude = ModelScores(
        sentiment=(0.9, 0.1, 0.0), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(0.02, 0.97, 0.01)
    )

    class RudeInference:
        async def infer(self, texts: Sequence[str]) -> InferenceResult:
            return InferenceResult([rude] * len(texts), "moderation", "2", 1.0)

    def record(offset: int, tenant: str | None) -> HistoryRecord:
        document = {
            "message_id": f"m-{offset}",
            "group_id": "g",
            "sender_id": "s-a",
            "text": f"good game everyone {offset}",
            "sent_at": (SENT_AT + timedelta(seconds=offset)).isoformat(),
        }
        if tenant is not None:
            document["tenant"] = tenant
        return HistoryRecord(0, offset, orjson.dumps(document))

    metrics = Metrics(CollectorRegistry())
    policy = PolicyStage(PolicyThresholds())
    policy.install_tenant("acme", PolicyThresholds(block_offensive=0.99))
    store = FakeStore(held=set())
    rescanner = Rescanner(
        history=FakeHistory([record(0, "acme"), record(1, None), record(2, "acme")]),
        store=store,
        inference=RudeInference(),
        rules=RuleStage(RuleEngine(default_ruleset()), metrics),
        strikes=FakeStrikes(),
        policy=policy,
        publisher=FakePublisher(),
        outbox=FakeMarker(),
        verdict_topic="moderation.verdicts",
        throttle=TokenBucket(1e6),
        batch_items=10,
        max_message_bytes=65536,
        metrics=metrics,
    )
    await rescanner.run(_plan(apply=True))
    decisions = {d.verdict.message_id: d.verdict.result.decision.value for d in store.decided}
    assert decisions == {"m-0": "flag", "m-1": "block", "m-2": "flag"}
