"""Tests for bench.staging_sql: the COPY alternative's staging table and draining insert."""

from __future__ import annotations

import pytest

from bench.staging_sql import VERDICT_STAGE_TYPES, insert_from_staging_sql, staging_table_sql
from pipelines.verdict_codec import VERDICT_COLUMNS


def test_the_stage_has_a_type_for_every_verdict_column() -> None:
    """Every column verdict_row fills has a staging type, in the codec's order."""
    sql = staging_table_sql("stage", VERDICT_COLUMNS, VERDICT_STAGE_TYPES)
    assert sql.startswith("CREATE TEMP TABLE IF NOT EXISTS stage (source_topic text, ")
    assert sql.endswith("model_spans text, tenant text) ON COMMIT DELETE ROWS")
    assert sql.count(",") == len(VERDICT_COLUMNS) - 1


def test_the_insert_converts_json_text_and_skips_existing_rows() -> None:
    """reasons becomes text[], rule_hits and scores jsonb, other columns pass as they are."""
    sql = insert_from_staging_sql("verdicts", "stage", ("source_topic", "reasons", "scores"))
    assert sql == (
        "INSERT INTO verdicts (source_topic, reasons, scores) SELECT source_topic, "
        "ARRAY(SELECT jsonb_array_elements_text(reasons::jsonb)), scores::jsonb "
        "FROM stage ON CONFLICT DO NOTHING"
    )


def test_names_that_are_not_plain_identifiers_are_refused() -> None:
    """A table or column name with SQL in it never reaches the statement."""
    with pytest.raises(ValueError, match="identifier"):
        insert_from_staging_sql("verdicts; DROP TABLE x", "stage", ("a",))
    with pytest.raises(ValueError, match="identifier"):
        staging_table_sql("stage", ("1abc",), {"1abc": "text"})
