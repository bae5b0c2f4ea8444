"""Tests for the batch processor's metrics: produce-to-verdict latency and per-batch counters."""

from __future__ import annotations

import time

from test_processing import _batch, _blocked, _broken, _rig, _work  # same folder's helpers


def _value(rig: object, name: str, labels: dict[str, str] | None = None) -> float:
    registry = rig.processor._metrics.registry  # type: ignore[attr-defined]
    value = registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else float(value)


async def test_produce_to_verdict_is_observed_from_the_record_timestamp() -> None:
    """Each stored verdict with a Kafka timestamp is observed once, measured up to the commit;
    records without a timestamp are not observed."""
    rig = _rig()
    works = [_work(rig.tracker, o) for o in range(3)]
    works[0].produced_at = time.time() - 2.0
    works[1].produced_at = time.time() - 2.0
    await rig.processor.process_model_batch(_batch(works))
    assert _value(rig, "modstream_produce_to_verdict_seconds_count") == 2
    total = _value(rig, "modstream_produce_to_verdict_seconds_sum")
    assert 4.0 <= total < 4.0 + 2 * 5.0


async def test_dead_letters_are_not_verdicts_for_the_latency_histogram() -> None:
    """A dead-lettered record has no verdict: it is not observed, the rule block next to it is."""
    rig = _rig()
    letter, block = _broken(rig.tracker, 0), _blocked(rig.tracker, 1)
    letter.produced_at = block.produced_at = time.time()
    await rig.processor.process_decided_batch(_batch([letter, block]))
    assert _value(rig, "modstream_produce_to_verdict_seconds_count") == 1


async def test_verdict_counters_add_up_per_label_set() -> None:
    """Counting once per label set gives the same totals as once per verdict."""
    rig = _rig()
    await rig.processor.process_model_batch(_batch([_work(rig.tracker, o) for o in range(4)]))
    labels = {"decision": "allow", "decided_by": "model"}
    assert _value(rig, "modstream_verdicts_total", labels) == 4
