"""Tests for engine.stores without a database: the SQL's columns and the arrays they take."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from common.settings import PostgresSettings
from engine.stores import pending_texts, verdict_batches
from engine.stores.arrays import position_arrays, verdict_arrays
from engine.stores.database import Database, StoreUnavailable
from engine.stores.pending_texts import PendingText, pending_text_arrays
from engine.stores.review_items import INSERT_REVIEW_ITEMS, Escalation, review_item_arrays
from engine.stores.strikes import StrikeStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.messages import SourcePosition
from pipelines.verdict import DecidedBy, Decision, PolicyResult, Verdict
from pipelines.verdict_codec import VERDICT_COLUMNS, verdict_row

SENT_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _verdict(offset: int) -> Verdict:
    return Verdict(
        position=SourcePosition("chat.messages", 1, offset),
        message_id=f"m-{offset}",
        group_id="g",
        sender_id="u",
        sent_at=SENT_AT,
        text_sha256="0" * 64,
        rule_hits=(),
        scores=None,
        result=PolicyResult(Decision.FLAG, DecidedBy.PENDING_MODEL, True, "spam", 0.4, ("a",)),
        model_name=None,
        model_version=None,
        batch_id=str(uuid.UUID(int=offset)),
        queue_ms=1.0,
        inference_ms=None,
    )


def _placeholders(sql: str) -> int:
    return len(set(re.findall(r"\$(\d+)", sql)))


def test_verdict_insert_names_the_codec_columns_in_order() -> None:
    """The INSERT's column list is VERDICT_COLUMNS, and it takes one array per column."""
    sql = verdict_batches._INSERT_VERDICTS
    names = re.search(r"INSERT INTO verdicts \((.*?)\)", sql, re.S)
    assert names is not None
    assert tuple(n.strip() for n in names.group(1).split(",")) == VERDICT_COLUMNS
    assert _placeholders(sql) == len(VERDICT_COLUMNS)
    assert _placeholders(pending_texts._APPLY_RESCORE) == len(VERDICT_COLUMNS)


def test_rescan_statements_take_every_verdict_array_then_their_own() -> None:
    """The rescan's statements unnest one array per verdict column; the rescan id (and the
    changed flags) come right after them, so a column added to the codec moves them along."""
    from worker import rescan_store

    columns = len(VERDICT_COLUMNS)
    assert rescan_store._COLUMNS.count(",") + 1 == columns
    assert _placeholders(rescan_store._KEEP) == columns + 1
    assert f"rescan_id = ${columns + 1}" in rescan_store._KEEP
    assert _placeholders(rescan_store._APPLY) == columns + 2
    assert f"${columns + 2}::bool[]" in rescan_store._APPLY
    assert "model_spans = x.ms::jsonb" in rescan_store._APPLY


def test_verdict_arrays_transpose_the_codec_rows() -> None:
    """Array i holds column i of every verdict, in verdict order."""
    verdicts = [_verdict(3), _verdict(4)]
    arrays = verdict_arrays(verdicts)
    assert len(arrays) == len(VERDICT_COLUMNS)
    assert [list(col) for col in zip(*arrays, strict=True)] == [
        list(verdict_row(v)) for v in verdicts
    ]


def test_review_and_pending_arrays_match_their_inserts() -> None:
    """Escalation and pending-text arrays have as many arrays as their INSERT has parameters."""
    verdict = _verdict(5)
    review = review_item_arrays([Escalation(verdict, "read me")])
    assert len(review) == _placeholders(INSERT_REVIEW_ITEMS)
    assert review[7] == ["read me"]
    assert review[11] == ['["a"]']
    texts = pending_text_arrays([PendingText(verdict.position, SENT_AT, "later")])
    assert len(texts) == _placeholders(pending_texts.INSERT_PENDING_TEXTS)
    assert texts == [["chat.messages"], [1], [5], [SENT_AT], ["later"]]


def test_position_arrays_split_coordinates() -> None:
    """Positions become topic, partition and offset arrays."""
    positions = [SourcePosition("a", 0, 1), SourcePosition("b", 2, 3)]
    assert position_arrays(positions) == (["a", "b"], [0, 2], [1, 3])


async def test_stores_before_start_are_unavailable() -> None:
    """Using a store before its database started raises StoreUnavailable (retry later)."""
    database = Database(PostgresSettings(dsn=SecretStr("postgresql://nobody@127.0.0.1:1/none")))
    with pytest.raises(StoreUnavailable):
        await VerdictOutboxStore(database).unpublished(0, 10)
    with pytest.raises(StoreUnavailable):
        await StrikeStore(database).sender_strikes(["u"])
    await VerdictOutboxStore(database).mark_published([])  # nothing to mark: no pool needed
