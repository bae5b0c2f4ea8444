"""review.metrics: queue depth, oldest item and target per queue; the standard collectors."""

from __future__ import annotations

from review.metrics import ReviewMetrics
from review.schemas import QueueDepth
from review.settings import ReviewSettings


def test_queue_figures_are_exported_per_queue_with_their_targets() -> None:
    """Each queue's open and claimed counts, its oldest item's age and its decision target
    (from the settings) appear under the queue's label."""
    metrics = ReviewMetrics()
    depths = [
        QueueDepth(queue="admin", open=0, claimed=1, oldest_age_s=30.0),
        QueueDepth(queue="moderator", open=12, claimed=2, oldest_age_s=4_000.0),
    ]
    metrics.observe_queues(depths, ReviewSettings(moderator_target_s=3_600).queue_targets_s)
    r = metrics.registry
    assert (
        r.get_sample_value("modstream_review_queue_items", {"queue": "moderator", "state": "open"})
        == 12
    )
    assert (
        r.get_sample_value("modstream_review_queue_items", {"queue": "admin", "state": "claimed"})
        == 1
    )
    assert (
        r.get_sample_value("modstream_review_queue_oldest_item_age_seconds", {"queue": "moderator"})
        == 4_000.0
    )
    assert (
        r.get_sample_value("modstream_review_queue_target_seconds", {"queue": "moderator"}) == 3_600
    )
    assert r.get_sample_value("modstream_review_queue_target_seconds", {"queue": "admin"}) == 14_400


def test_the_review_registry_carries_the_process_and_gc_collectors() -> None:
    """The process, platform and GC collectors are registered in the service's own registry."""
    body, _ = ReviewMetrics().render()
    text = body.decode()
    for name in ("process_resident_memory_bytes", "python_gc_collections_total", "python_info"):
        assert f"\n{name}" in text or text.startswith(name)
