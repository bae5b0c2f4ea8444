"""The reviewer's audit of flags on held-out everyday text: its file, and how it counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelbuild.flag_audit import AUDIT_FILE, AuditError, FlagAudit, audit_key, load_audit


def _write(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


def test_the_shipped_audit_loads_and_holds_no_text() -> None:
    """Every set is there with both labels; rows carry keys, never a line's words."""
    audits = load_audit()
    assert set(audits) == {"everyday_en", "everyday_en_film", "everyday_zh"}
    for audit in audits.values():
        assert {"harmful", "ordinary"} <= set(audit.labels.values())
    for line in AUDIT_FILE.read_text(encoding="utf-8").splitlines():
        assert set(json.loads(line)) == {"set", "sha256", "label", "kind"}


def test_unread_and_ordinary_flags_count_as_false() -> None:
    """Only a flag on a line audited harmful is taken off; one nobody read counts as false."""
    audit = FlagAudit({audit_key("you fool"): "harmful", audit_key("mom called"): "ordinary"})
    texts = ["you fool", "mom called", "never read", "not flagged"]
    figures = audit.figures(texts, [True, True, True, False], [True, True, False, False])
    assert figures == {
        "flags_harmful": 1,
        "flags_unaudited": 1,
        "false_flag_rate": 0.5,
        "false_block_rate": 0.25,
    }


def test_no_flags_no_false_flags() -> None:
    audit = FlagAudit({audit_key("a"): "harmful"})
    assert audit.figures(["a", "b"], [False, False], [False, False])["false_flag_rate"] == 0.0
    assert audit.figures([], [], [])["false_block_rate"] == 0.0


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"set": "everyday_fr", "sha256": "0" * 16, "label": "harmful"}, "unknown set"),
        ({"set": "everyday_en", "sha256": "0" * 8, "label": "harmful"}, "16 hex"),
        ({"set": "everyday_en", "sha256": "0" * 16, "label": "maybe"}, "harmful or ordinary"),
        (["everyday_en"], "not an object"),
    ],
)
def test_bad_rows_are_refused_by_line(tmp_path: Path, row: object, problem: str) -> None:
    good = {"set": "everyday_en", "sha256": "1" * 16, "label": "ordinary"}
    with pytest.raises(AuditError, match=rf"audit.jsonl:2: .*{problem}"):
        load_audit(_write(tmp_path, [good, row]))


def test_a_line_labelled_both_ways_is_refused(tmp_path: Path) -> None:
    rows = [
        {"set": "everyday_en", "sha256": "1" * 16, "label": "ordinary"},
        {"set": "everyday_en", "sha256": "1" * 16, "label": "harmful"},
    ]
    with pytest.raises(AuditError, match="labelled twice"):
        load_audit(_write(tmp_path, rows))


def test_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(AuditError, match=r"audit\.jsonl:1: not JSON"):
        load_audit(path)
