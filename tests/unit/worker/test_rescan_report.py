"""The rescan report: directions, counting changes with examples, the JSON it is saved as."""

from __future__ import annotations

import orjson

from pipelines.messages import SourcePosition
from worker.rescan_report import EXAMPLES, RescanReport, direction
from worker.rescan_review import AppliedBatch


def test_direction_marks_the_escalated_side() -> None:
    assert direction("allow", False, "flag", True) == "allow->flag+review"
    assert direction("block", True, "allow", False) == "block+review->allow"
    assert direction("flag", False, "flag", True) == "flag->flag+review"


def test_changes_are_counted_per_category_and_direction_with_a_few_examples() -> None:
    report = RescanReport()
    for i in range(EXAMPLES + 3):
        report.add_change("offensive", "allow->flag", f"m-{i}")
    report.add_change("spam", "flag->allow", "s-1")
    assert report.changed == EXAMPLES + 4
    assert report.changes == {
        "offensive": {"allow->flag": EXAMPLES + 3},
        "spam": {"flag->allow": 1},
    }
    assert report.examples["offensive"]["allow->flag"] == [f"m-{i}" for i in range(EXAMPLES)]


def test_the_saved_json_round_trips_through_the_database_form() -> None:
    report = RescanReport(window=10, read=9, compared=7, unchanged=6, no_verdict=1, expired=1)
    report.add_change("hate", "allow->block+review", "h-1")
    report.applied = 1
    saved = orjson.loads(orjson.dumps(report.as_json()))
    again = RescanReport.from_json(saved)
    assert again == report
    assert again.counts()["changed"] == 1


def test_what_a_batch_applied_is_added_and_saved() -> None:
    """Applied counts the changed verdicts updated; stamped, closed and opened add up per batch
    and survive the saved form; kept verdicts are counted where they are compared."""
    report = RescanReport(kept=2, kept_differs=1)
    positions = frozenset(SourcePosition("t", 0, o) for o in range(3))
    report.add_applied(AppliedBatch(updated=positions, stamped=5, kept=2, closed=1, opened=2))
    report.add_applied(AppliedBatch(stamped=4, opened=1))
    assert (report.applied, report.stamped, report.closed, report.opened) == (3, 9, 1, 3)
    again = RescanReport.from_json(orjson.loads(orjson.dumps(report.as_json())))
    assert again == report
    assert "kept=2 kept_differs=1 stamped=9 closed=1 opened=3" in again.render()


def test_an_old_report_without_a_counter_reads_it_as_zero() -> None:
    assert RescanReport.from_json({"read": 3}).counts() == {**RescanReport().counts(), "read": 3}


def test_render_has_the_counts_then_one_line_per_change() -> None:
    report = RescanReport(read=2, compared=2)
    report.add_change("offensive", "allow->flag", "m-1")
    lines = report.render().splitlines()
    assert lines[0].startswith("read=2 compared=2 changed=1 applied=0")
    assert "offensive" in lines[1]
    assert "allow->flag" in lines[1]
    assert lines[1].rstrip().endswith("e.g. m-1")
