"""Tests for engine.stores.one_statement and the batch write it builds: one statement per batch."""

from __future__ import annotations

import re

import pytest

from engine.stores.one_statement import one_statement, shift_placeholders
from engine.stores.pending_texts import PendingText
from engine.stores.review_items import Escalation
from engine.stores.verdict_batches import DeadLetter, VerdictBatch, batch_parts
from pipelines.messages import SourcePosition
from tests.unit.engine.test_stores import SENT_AT, _verdict


def test_shift_renumbers_whole_placeholders() -> None:
    """$1 and $10 both move by the shift; $1 is never mistaken for the start of $10."""
    assert shift_placeholders("SELECT $1, $10::int[], $2", 24) == "SELECT $25, $34::int[], $26"


def test_parts_become_with_clauses_with_their_arguments_in_order() -> None:
    """Each part is a WITH clause numbered after the previous parts' arguments."""
    sql, args = one_statement(
        [
            ("INSERT INTO a SELECT * FROM unnest($1::int[], $2::text[])", [[1], ["x"]]),
            ("INSERT INTO b SELECT $1, t FROM unnest($2::text[]) AS x(t);", ["g", ["y"]]),
        ]
    )
    assert sql == (
        "WITH part_0 AS (\nINSERT INTO a SELECT * FROM unnest($1::int[], $2::text[])\n),\n"
        "part_1 AS (\nINSERT INTO b SELECT $3, t FROM unnest($4::text[]) AS x(t)\n)\nSELECT 1"
    )
    assert args == [[1], ["x"], "g", ["y"]]


def test_a_part_with_the_wrong_number_of_arguments_is_refused() -> None:
    """Arguments must match each part's placeholders, and there must be something to write."""
    with pytest.raises(ValueError, match="takes 2 arguments, got 1"):
        one_statement([("INSERT INTO a SELECT $1, $2", [1])])
    with pytest.raises(ValueError, match="without gaps"):
        one_statement([("INSERT INTO a SELECT $1, $3", [1, 2])])
    with pytest.raises(ValueError, match="nothing"):
        one_statement([])


def test_a_full_batch_is_one_statement_with_every_insert() -> None:
    """Verdicts, review items, dead letters, pending texts and offsets: five parts, one statement,
    placeholders numbered 1..n matching the arguments, offsets in sorted partition order."""
    verdict = _verdict(7)
    batch = VerdictBatch(
        [verdict],
        [Escalation(verdict, "read me")],
        [DeadLetter(SourcePosition("chat.messages", 0, 3), "bad_json", "nope", 4)],
        {("chat.messages", 1): 8, ("chat.messages", 0): 4},
        [PendingText(verdict.position, SENT_AT, "later")],
    )
    parts = batch_parts(batch, "group-a")
    tables = [re.search(r"INSERT INTO (\w+)", sql).group(1) for sql, _ in parts]  # type: ignore[union-attr]
    assert tables == [
        "verdicts",
        "review_items",
        "dead_letters",
        "pending_texts",
        "consumer_offsets",
    ]
    sql, args = one_statement(parts)
    numbers = {int(n) for n in re.findall(r"\$(\d+)", sql)}
    assert numbers == set(range(1, len(args) + 1))
    assert args[-4:] == ["group-a", ["chat.messages"] * 2, [0, 1], [4, 8]]


def test_an_offsets_only_batch_has_one_part() -> None:
    """A batch that only moves offsets writes just the offsets; an empty batch writes nothing."""
    assert [p[1][0] for p in batch_parts(VerdictBatch(offsets={("t", 0): 1}), "g")] == ["g"]
    assert batch_parts(VerdictBatch(), "g") == []
