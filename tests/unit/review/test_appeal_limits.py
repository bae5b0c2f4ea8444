"""Appeal limits and figures without services: the statement bound, deadlines, metrics."""

from __future__ import annotations

from typing import Any, cast

import pytest

from review.appeals import AppealDesk
from review.errors import StatementTooLongError
from review.metrics import ReviewMetrics
from review.schemas import QueueDepth
from review.settings import ReviewSettings


def _desk(**settings: Any) -> AppealDesk:
    # The statement check reads the settings only; no pool is touched.
    return AppealDesk(cast(Any, None), ReviewSettings(**settings))


def test_the_statement_limit_is_2000_characters_by_default() -> None:
    """2,000 characters pass; one more is a typed refusal that gives the limit, not the text."""
    desk = _desk()
    desk.check_statement("é" * 2_000)
    with pytest.raises(StatementTooLongError) as caught:
        desk.check_statement("secret " * 300)
    assert caught.value.code == "statement_too_long"
    assert caught.value.status_code == 422
    assert "2000" in str(caught.value)
    assert "secret" not in str(caught.value)


def test_the_statement_limit_is_a_setting() -> None:
    _desk(max_statement_chars=10).check_statement("x" * 10)
    with pytest.raises(StatementTooLongError):
        _desk(max_statement_chars=10).check_statement("x" * 11)


def test_the_appeals_queue_has_a_target_of_its_own() -> None:
    """Appeals are due 48 hours after filing unless configured otherwise."""
    assert ReviewSettings().queue_targets_s["appeals"] == 172_800.0
    assert ReviewSettings(appeals_target_s=3_600).queue_targets_s["appeals"] == 3_600


def test_overdue_items_and_appeal_counts_are_exported_per_queue() -> None:
    metrics = ReviewMetrics()
    depths = [
        QueueDepth(queue="appeals", open=3, claimed=1, oldest_age_s=200_000.0, overdue=2),
        QueueDepth(queue="moderator", open=1, claimed=0, oldest_age_s=5.0),
    ]
    metrics.observe_queues(depths, ReviewSettings().queue_targets_s)
    metrics.appeals_decided_total.labels("hate", "reversed").inc()
    r = metrics.registry
    assert r.get_sample_value("modstream_review_queue_overdue_items", {"queue": "appeals"}) == 2
    assert r.get_sample_value("modstream_review_queue_overdue_items", {"queue": "moderator"}) == 0
    assert (
        r.get_sample_value("modstream_review_queue_target_seconds", {"queue": "appeals"}) == 172_800
    )
    # Both channels are exported from the start, so a rate over them is never absent.
    assert r.get_sample_value("modstream_review_appeals_filed_total", {"channel": "kafka"}) == 0
    assert (
        r.get_sample_value(
            "modstream_review_appeals_decided_total", {"category": "hate", "outcome": "reversed"}
        )
        == 1
    )
