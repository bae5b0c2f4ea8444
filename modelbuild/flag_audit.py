"""A reviewer's reading of the flags on the held-out everyday text.

The everyday sets (:mod:`modelbuild.real_text`) are real lines nobody labelled, and some of them
are real abuse: film characters swear at each other, texters insult each other. A flag on such a
line is right, yet the plain flag rate counts it against the model. So a person read every line
the served model flags in those sets, and every English line the previous model flags, and
marked it ``harmful`` (what a moderator would act on:
an insult or profanity aimed at someone, a slur, a threat, a statement of self-harm, sexual talk
at someone, spam) or ``ordinary``. The file (``data/real_text_audit.jsonl``) holds one row per
line: its set, the first 16 hex digits of the SHA-256 of the line as the set holds it, the label
and the kind of harm; never the text.

:meth:`FlagAudit.figures` counts a flag (or a block) as false unless the audit marks its line
harmful, so a line flagged by a later model that nobody has read counts against that model,
never for it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AUDIT_FILE",
    "AuditError",
    "FlagAudit",
    "audit_key",
    "load_audit",
]

AUDIT_FILE = Path(__file__).parent / "data" / "real_text_audit.jsonl"
_LABELS = frozenset({"harmful", "ordinary"})
_SETS = frozenset({"everyday_en", "everyday_en_film", "everyday_zh"})
_KEY_CHARS = 16


class AuditError(ValueError):
    """The audit file is not the layout this reader expects."""


def audit_key(text: str) -> str:
    """The key of a line in the audit: a prefix of the SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_KEY_CHARS]


@dataclass(frozen=True, slots=True)
class FlagAudit:
    """The audited lines of one set: key -> label."""

    labels: Mapping[str, str]

    def figures(
        self, texts: Sequence[str], flagged: Sequence[bool], blocked: Sequence[bool]
    ) -> dict[str, float | int]:
        """Flags on lines audited harmful, flags nobody read, and the false flag and block rates
        (flags or blocks on every line not audited harmful, over all lines)."""
        harmful = unread = false_blocks = 0
        for text, hit, block in zip(texts, flagged, blocked, strict=True):
            if not hit:
                continue
            label = self.labels.get(audit_key(text))
            harmful += label == "harmful"
            unread += label is None
            false_blocks += block and label != "harmful"
        n = len(texts)
        return {
            "flags_harmful": harmful,
            "flags_unaudited": unread,
            "false_flag_rate": round((sum(flagged) - harmful) / n, 4) if n else 0.0,
            "false_block_rate": round(false_blocks / n, 4) if n else 0.0,
        }


def load_audit(path: Path = AUDIT_FILE) -> dict[str, FlagAudit]:
    """Every set's audit from ``path``; :class:`AuditError` names the first bad row."""
    found: dict[str, dict[str, str]] = {name: {} for name in _SETS}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise AuditError(f"{path.name}:{number}: not JSON") from None
        if not isinstance(row, dict):
            raise AuditError(f"{path.name}:{number}: not an object")
        name, key, label = row.get("set"), row.get("sha256"), row.get("label")
        if name not in _SETS:
            raise AuditError(f"{path.name}:{number}: unknown set {name!r}")
        if not isinstance(key, str) or len(key) != _KEY_CHARS:
            raise AuditError(f"{path.name}:{number}: sha256 must be {_KEY_CHARS} hex digits")
        if label not in _LABELS:
            raise AuditError(f"{path.name}:{number}: label must be harmful or ordinary")
        if key in found[name] and found[name][key] != label:
            raise AuditError(f"{path.name}:{number}: the line is labelled twice, differently")
        found[name][key] = label
    return {name: FlagAudit(labels) for name, labels in found.items()}
