"""Tests for engine.rescore: pending verdicts get model scores, updated in place, republished."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
import pytest

from engine.inference import InferenceRejected, InferenceResult, InferenceUnavailable
from engine.policy_stage import PolicyStage
from engine.rescore import Rescorer
from engine.stores.pending_texts import PendingRow, RescoreRejection
from engine.stores.review_items import Escalation
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleAction, RuleHit, Severity
from pipelines.scores import ModelScores
from pipelines.verdict import DecidedBy, Verdict
from pipelines.verdict_factory import MessageFacts

SENT_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CALM = ModelScores(sentiment=(0.1, 0.8, 0.1), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(1.0, 0.0, 0.0))
HATE = ModelScores(
    sentiment=(0.9, 0.1, 0.0), intent=(1.0, 0.0, 0.0, 0.0), toxicity=(0.0, 0.02, 0.98)
)


def _pending(offset: int, hits: list[dict[str, object]] | None = None) -> PendingRow:
    return PendingRow(
        facts=MessageFacts(
            position=SourcePosition("chat.messages", 0, offset),
            message_id=f"m-{offset}",
            group_id="g",
            sender_id="u",
            sent_at=SENT_AT,
            text_sha256="0" * 64,
        ),
        rule_hits=list(hits or []),
        queue_ms=3.0,
        text=f"text {offset}",
    )


class FakeInference:
    def __init__(
        self,
        scores: list[ModelScores] | None = None,
        *,
        down: bool = False,
        refuses: frozenset[str] = frozenset(),
    ) -> None:
        self.scores = scores
        self.down = down
        self.refuses = refuses
        self.calls: list[list[str]] = []

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        self.calls.append(list(texts))
        if self.down:
            raise InferenceUnavailable("down")
        if self.refuses & set(texts):
            raise InferenceRejected("triton StatusCode.INVALID_ARGUMENT: the model said why")
        scores = self.scores or [CALM] * len(texts)
        return InferenceResult(scores[: len(texts)], "moderation", "3", 5.0)


class FakeStore:
    def __init__(self, rows: list[PendingRow], *, already_done: set[int] | None = None) -> None:
        self.rows = rows
        self.already_done = already_done or set()
        self.applied: list[Verdict] = []
        self.escalations: list[Escalation] = []
        self.marked: list[SourcePosition] = []
        self.rejected: list[RescoreRejection] = []
        self.orphans_dropped = 0

    async def pending_model_rows(
        self, limit: int, topic: str | None = None, partitions: Sequence[int] | None = None
    ) -> list[PendingRow]:
        return self.rows[:limit]

    async def apply_rescore(
        self,
        verdicts: Sequence[Verdict],
        escalations: Sequence[Escalation],
        done: Sequence[SourcePosition],
        rejected: Sequence[RescoreRejection] = (),
    ) -> set[SourcePosition]:
        self.rejected.extend(rejected)
        updated = {v.position for v in verdicts if v.position.offset not in self.already_done}
        self.applied.extend(v for v in verdicts if v.position in updated)
        self.escalations.extend(escalations)
        gone = set(done) | {r.position for r in rejected}
        self.rows = [r for r in self.rows if r.facts.position not in gone]
        return updated

    async def mark_published(self, keys: Sequence[tuple[SourcePosition, datetime]]) -> None:
        self.marked.extend(k for k, _ in keys)

    async def drop_orphan_texts(self) -> int:
        self.orphans_dropped += 1
        return 0


class FakePublisher:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        self.sent.extend(v for _, v in records)


def _rescorer(
    store: FakeStore, inference: FakeInference, publisher: FakePublisher, batch_items: int = 2
) -> Rescorer:
    return Rescorer(
        inference=inference,
        store=store,
        outbox=store,
        publisher=publisher,
        policy=PolicyStage(PolicyThresholds()),
        verdict_topic="moderation.verdicts",
        batch_items=batch_items,
    )


async def test_all_pending_rows_become_model_verdicts_and_are_republished() -> None:
    """Every page is scored; updated verdicts say decided_by=model with the model's version and
    are published then marked; orphans are swept at the end."""
    store = FakeStore([_pending(i) for i in range(5)])
    inference = FakeInference()
    publisher = FakePublisher()
    assert await _rescorer(store, inference, publisher).rescore_all() == 5
    assert [len(c) for c in inference.calls] == [2, 2, 1]
    assert {v.result.decided_by for v in store.applied} == {DecidedBy.MODEL}
    assert {v.model_version for v in store.applied} == {"3"}
    records = [orjson.loads(v) for v in publisher.sent]
    assert sorted(r["source_offset"] for r in records) == [0, 1, 2, 3, 4]
    assert all(r["decided_by"] == "model" for r in records)
    assert len(store.marked) == 5
    assert store.orphans_dropped == 1


async def test_harmful_scores_escalate_and_keep_rule_hits() -> None:
    """Stored rule hits are weighed with the new scores: a hateful text is blocked and the hits
    stay on the verdict."""
    hit = RuleHit("en.flag.1", "spam", Severity.LOW, RuleAction.FLAG)
    store = FakeStore([_pending(1, [hit.as_dict()])])
    await _rescorer(store, FakeInference([HATE]), FakePublisher()).rescore_once()
    (verdict,) = store.applied
    assert verdict.rule_hits == (hit,)
    assert verdict.result.decision.value == "block"


async def test_rows_another_rescorer_took_are_not_republished() -> None:
    """A row already updated elsewhere (not returned as updated) is not published again."""
    store = FakeStore([_pending(1), _pending(2)], already_done={1})
    publisher = FakePublisher()
    await _rescorer(store, FakeInference(), publisher).rescore_once()
    assert [orjson.loads(v)["source_offset"] for v in publisher.sent] == [2]


async def test_model_down_changes_nothing() -> None:
    """When inference fails the error propagates and no row is touched."""
    store = FakeStore([_pending(1)])
    with pytest.raises(InferenceUnavailable):
        await _rescorer(store, FakeInference(down=True), FakePublisher()).rescore_once()
    assert store.applied == []
    assert len(store.rows) == 1


async def test_a_text_the_model_rejects_is_set_aside_and_the_rest_are_rescored() -> None:
    """INVALID_ARGUMENT on one text: that row is recorded as not re-scorable (its text dropped,
    its rules-only verdict kept) and every other row of the page and after it is re-scored."""
    store = FakeStore([_pending(i) for i in range(7)])
    inference = FakeInference(refuses=frozenset({"text 2"}))
    publisher = FakePublisher()
    assert await _rescorer(store, inference, publisher, batch_items=4).rescore_all() == 6
    assert sorted(v.position.offset for v in store.applied) == [0, 1, 3, 4, 5, 6]
    (rejection,) = store.rejected
    assert rejection.position.offset == 2
    assert rejection.reason == "triton StatusCode.INVALID_ARGUMENT"  # never the model's text
    assert store.rows == []
    assert sorted(orjson.loads(v)["source_offset"] for v in publisher.sent) == [0, 1, 3, 4, 5, 6]


async def test_model_down_while_isolating_a_rejection_changes_nothing() -> None:
    """If the model goes away while a rejected page is split, nothing is applied or dropped."""

    class _Flaky(FakeInference):
        async def infer(self, texts: Sequence[str]) -> InferenceResult:
            if len(self.calls) >= 1:
                self.down = True
            return await super().infer(texts)

    store = FakeStore([_pending(i) for i in range(4)])
    with pytest.raises(InferenceUnavailable):
        await _rescorer(
            store, _Flaky(refuses=frozenset({"text 1"})), FakePublisher(), 4
        ).rescore_once()
    assert store.applied == []
    assert store.rejected == []
    assert len(store.rows) == 4
