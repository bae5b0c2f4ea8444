"""What a rescan found: how many messages it read and compared, and which decisions changed.

A decision *changes* when the new verdict's decision or its escalation differs from the stored
one; a verdict a person has (``worker.rescan_review``) is never changed: it is counted as
``kept`` (and ``kept_differs`` when the rescan would decide it differently). Changes are
counted per category (the new verdict's, or the stored one's where the new verdict has none)
and direction, written ``old->new`` with ``+review`` on an escalated side
(``allow->flag+review``), each with up to :data:`EXAMPLES` message ids. The report is kept in
``rescans.report`` as JSON (:meth:`RescanReport.as_json` / :meth:`RescanReport.from_json`), so
a resumed rescan goes on counting where it stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from worker.rescan_review import AppliedBatch

__all__ = ["EXAMPLES", "RescanReport", "direction"]

EXAMPLES = 5
"""Message ids kept per category and direction."""

_COUNTERS = (
    "window",
    "read",
    "compared",
    "unchanged",
    "changed",
    "kept",
    "kept_differs",
    "applied",
    "stamped",
    "closed",
    "opened",
    "no_verdict",
    "undecodable",
    "refused",
    "other_groups",
    "expired",
)


def direction(old: str, old_escalated: bool, new: str, new_escalated: bool) -> str:
    """``old->new``, each side with ``+review`` when escalated."""
    return f"{old}{'+review' if old_escalated else ''}->{new}{'+review' if new_escalated else ''}"


@dataclass(slots=True)
class RescanReport:
    """Counts of one rescan; every record of the window lands in exactly one of ``compared``
    (then ``unchanged``, ``changed`` or ``kept``), ``no_verdict``, ``undecodable``, ``refused`` or
    ``other_groups``; ``expired`` counts verdicts whose records have left the topic."""

    window: int = 0
    """Offsets in the window when the rescan was planned (what the progress bar counts to)."""
    read: int = 0
    """Records read from the topic inside the window."""
    compared: int = 0
    unchanged: int = 0
    changed: int = 0
    kept: int = 0
    """Verdicts a person decided or holds (as read): never changed, whatever the rescan says."""
    kept_differs: int = 0
    """Of ``kept``, those the rescan would decide differently."""
    applied: int = 0
    """Changed verdicts updated in PostgreSQL (``--apply`` only; this and the three below
    count what each batch's transaction did)."""
    stamped: int = 0
    """Verdicts updated in place with the rescan's model and id, changed or not."""
    closed: int = 0
    """Review items closed because their verdict is no longer escalated."""
    opened: int = 0
    """Review items opened (or reopened) for new escalations."""
    no_verdict: int = 0
    """Records with no stored verdict (dead letters, or not decided yet by the live worker)."""
    undecodable: int = 0
    refused: int = 0
    """Texts the model refused to score (kept as they are)."""
    other_groups: int = 0
    """Records of other groups than ``--group``."""
    expired: int = 0
    changes: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def add_change(self, category: str, moved: str, message_id: str) -> None:
        self.changed += 1
        per = self.changes.setdefault(category, {})
        per[moved] = per.get(moved, 0) + 1
        ids = self.examples.setdefault(category, {}).setdefault(moved, [])
        if len(ids) < EXAMPLES:
            ids.append(message_id)

    def add_applied(self, applied: AppliedBatch) -> None:
        """Count what one batch's transaction applied."""
        self.applied += len(applied.updated)
        self.stamped += applied.stamped
        self.closed += applied.closed
        self.opened += applied.opened

    def counts(self) -> dict[str, int]:
        """The counters alone (for log lines and progress)."""
        return {name: int(getattr(self, name)) for name in _COUNTERS}

    def as_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RescanReport:
        report = cls()
        for name in _COUNTERS:
            setattr(report, name, int(data.get(name, 0)))
        report.changes = {
            c: {d: int(n) for d, n in m.items()} for c, m in data.get("changes", {}).items()
        }
        report.examples = {
            c: {d: [str(i) for i in ids] for d, ids in m.items()}
            for c, m in data.get("examples", {}).items()
        }
        return report

    def render(self) -> str:
        """The report as a person reads it (counts, then one line per category and direction)."""
        lines = [
            f"read={self.read} compared={self.compared} changed={self.changed} "
            f"applied={self.applied} unchanged={self.unchanged} kept={self.kept} "
            f"kept_differs={self.kept_differs} stamped={self.stamped} closed={self.closed} "
            f"opened={self.opened} no_verdict={self.no_verdict} "
            f"undecodable={self.undecodable} refused={self.refused} "
            f"other_groups={self.other_groups} expired={self.expired}"
        ]
        for category in sorted(self.changes):
            for moved, count in sorted(self.changes[category].items()):
                ids = ", ".join(self.examples.get(category, {}).get(moved, []))
                lines.append(f"  {category:<16} {moved:<28} {count:>7}  e.g. {ids}")
        return "\n".join(lines)
