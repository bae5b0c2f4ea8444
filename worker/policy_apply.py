"""A policy proposal made live by an admin (``modstream policy apply PROPOSAL``).

``modstream policy calibrate`` writes a proposal: a policy file (``pipelines.policy_file``) that
no service reads. Applying it:

1. reads and validates the proposal over the configured thresholds exactly as the services
   would load it; one that does not load is refused with the reason and nothing changes;
2. records, in PostgreSQL, who applied it and when (the admin whose API token was given: an
   enabled review user with role ``admin``), its SHA-256, where it went live and the thresholds
   before and after (``policy_applications``, ``engine.stores.policy_applications``);
3. in the same transaction, writes the live policy file (atomically: a watching service never
   reads half a file), headed by a comment naming the admin, the time and the proposal. Every
   running worker and online service reloads it within ``policy_file.reload_interval_s``
   (``engine.policy_watch``).

If the record is refused (not an admin's token) the file is not written; if the file cannot be
written nothing is recorded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from common.api_tokens import digest
from engine.stores.policy_applications import Applied, PolicyApplication
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import PolicyFileError, load_policy_file, parse_policy

__all__ = [
    "AppliedProposal",
    "Proposal",
    "Recorder",
    "apply_proposal",
    "read_proposal",
    "write_atomically",
]


class Recorder(Protocol):
    """Where applications are recorded (``engine.stores.policy_applications``)."""

    async def record(
        self, token_sha256: str, application: PolicyApplication, then: Callable[[Applied], None]
    ) -> Applied: ...


@dataclass(frozen=True, slots=True)
class Proposal:
    """A proposal file that loads: its text, SHA-256 and the thresholds it gives."""

    path: Path
    text: str
    sha256: str
    thresholds: PolicyThresholds


@dataclass(frozen=True, slots=True)
class AppliedProposal:
    """What went live, where, by whom and when."""

    proposal: Proposal
    target: Path
    applied_by: str
    applied_at: datetime


def read_proposal(path: Path, base: PolicyThresholds) -> Proposal:
    """The proposal at ``path`` loaded over ``base`` as the services would load it; a file that
    does not load raises :class:`PolicyFileError` with the reason."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"cannot read {path}: {type(exc).__name__}") from exc
    try:
        thresholds = parse_policy(text, base)
    except PolicyFileError as exc:
        raise PolicyFileError(f"{path}: {exc}") from exc
    return Proposal(path, text, hashlib.sha256(data).hexdigest(), thresholds)


def live_text(proposal: Proposal, applied: Applied) -> str:
    """The live file: the proposal as it is, headed by who applied it, when and from what."""
    header = (
        f"# applied by {applied.applied_by} at {applied.applied_at.isoformat()} "
        f"with modstream policy apply, from {proposal.path.name} (sha256 {proposal.sha256})\n"
    )
    return header + proposal.text


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a staged file and a rename."""
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, path)


def _apart(proposal: Path, target: Path) -> None:
    """Refuse a "proposal" that is the live file itself."""
    if proposal.resolve() == target.resolve():
        raise PolicyFileError(f"{proposal} is the live policy file, not a proposal")


def _in_use(target: Path, base: PolicyThresholds) -> PolicyThresholds:
    """The thresholds the live file gives now (``base`` where there is none, or it is refused:
    the services then run on ``base`` or on what they loaded before)."""
    if not target.exists():
        return base
    try:
        return load_policy_file(target, base)
    except PolicyFileError:
        return base


async def apply_proposal(
    proposal: Proposal,
    *,
    target: Path,
    base: PolicyThresholds,
    token: str,
    store: Recorder,
) -> AppliedProposal:
    """Record ``proposal`` as applied by the admin whose API ``token`` this is and write it to
    ``target`` (module docstring). Raises ``NotAnAdmin`` (nothing written), ``PolicyFileError``
    (the proposal or target path is refused) or ``OSError`` from the write (nothing recorded)."""
    _apart(proposal.path, target)
    previous = _in_use(target, base)

    def write(applied: Applied) -> None:
        text = live_text(proposal, applied)
        parse_policy(text, base)  # the header must not change what it gives
        write_atomically(target, text)

    applied = await store.record(
        digest(token),
        PolicyApplication(
            proposal_name=proposal.path.name,
            proposal_sha256=proposal.sha256,
            target=str(target),
            thresholds=dataclasses.asdict(proposal.thresholds),
            previous=dataclasses.asdict(previous),
        ),
        write,
    )
    return AppliedProposal(proposal, target, applied.applied_by, applied.applied_at)
