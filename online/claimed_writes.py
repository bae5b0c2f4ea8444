"""The online service's verdict write: a batch's claims and its verdicts in one statement.

An online check is decided at coordinates of its own (``ClaimStore.reserve``) and its message id
is claimed by the statement that stores its verdict: the claims (``INSERT INTO online_messages``,
ids in sorted order, so two instances writing overlapping ids cannot deadlock) are one more part
of the batch's one statement, beside the verdicts, escalations and pending texts
``engine.stores.verdict_batches`` writes for every batch. A claim and its verdict are therefore
stored together or not at all: no claim is ever left without its row.

The claims part has no ``ON CONFLICT``: a message id claimed before (a repeat whose first call was
decided elsewhere, or that this process no longer remembers) makes PostgreSQL refuse the whole
statement, which then stored nothing. The ids' stored claims are read, and the batch is written
again without them: a repeat's verdict, escalation and pending text are dropped, never stored or
published, and its call is answered from the stored row (``online.moderator``). A verdict decided
again at its own stored claim (a first call that claimed under an earlier version and vanished)
is written without a new claim. :meth:`ClaimedWrites.write` returns what was stored.

The statement is the engine's one verdict write (``VerdictBatchStore.write``, the stream's too),
with the claims as its first part; it carries the published marks of verdicts written before
(``engine.stores.carried_marks``): one round trip per write group, not two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.stores.database import StoreConflict, StoreError
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from online.claims import ONLINE_TOPIC, Claim, ClaimStore
from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict

__all__ = ["ClaimedWrites"]

_CLAIMS = """
INSERT INTO online_messages (message_id, source_offset, sent_at)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::timestamptz[])
"""

_CLAIM_KEY = "online_messages_pkey"
"""The constraint a message id claimed before violates."""

_MAX_ATTEMPTS = 5
"""Statements one write may take: each conflict removes the ids it names, so only claims made
elsewhere in between can add another."""


def _only(batch: VerdictBatch, keep: set[SourcePosition]) -> VerdictBatch:
    """The part of ``batch`` whose records are at ``keep``."""
    return VerdictBatch(
        [v for v in batch.verdicts if v.position in keep],
        [e for e in batch.escalations if e.verdict.position in keep],
        [d for d in batch.dead_letters if d.position in keep],
        dict(batch.offsets),
        [p for p in batch.pending_texts if p.position in keep],
    )


def _claims_part(verdicts: Sequence[Verdict]) -> tuple[str, list[Any]]:
    ordered = sorted(verdicts, key=lambda v: v.message_id)
    return _CLAIMS, [
        [v.message_id for v in ordered],
        [v.position.offset for v in ordered],
        [v.sent_at for v in ordered],
    ]


class ClaimedWrites:
    """Writes online verdict batches with their claims (the processor's ``BatchStore``), through
    ``verdicts``, the engine's verdict write (which carries the published marks)."""

    def __init__(self, verdicts: VerdictBatchStore, claims: ClaimStore) -> None:
        self._verdicts = verdicts
        self._claims = claims

    async def write(self, batch: VerdictBatch) -> VerdictBatch:
        """Store ``batch`` with the claims of its online verdicts, atomically; returns what was
        stored (repeats of message ids claimed before are left out). Raises like
        ``VerdictBatchStore.write``: ``StoreUnavailable`` to be retried, ``StoreError`` when
        PostgreSQL refuses the data."""
        kept = {v.position for v in batch.verdicts}
        kept.update(d.position for d in batch.dead_letters)
        reclaimed: set[SourcePosition] = set()
        for _ in range(_MAX_ATTEMPTS):
            part = _only(batch, kept)
            claiming = self._claiming(part.verdicts, reclaimed, kept)
            part = _only(batch, kept)
            first = [_claims_part(claiming)] if claiming else []
            try:
                await self._verdicts.write(part, first=first)
            except StoreConflict as exc:
                if exc.constraint != _CLAIM_KEY:
                    raise
                stored = await self._claims.claimed([v.message_id for v in claiming])
                for verdict in claiming:
                    claim = stored.get(verdict.message_id)
                    if claim is None:
                        continue
                    if claim.position == verdict.position:
                        reclaimed.add(verdict.position)  # decided again at its own claim
                    else:
                        kept.discard(verdict.position)  # a repeat: the stored row answers it
                continue
            self._claims.remember(
                (v.message_id, Claim(v.position, v.sent_at))
                for v in part.verdicts
                if v.position.topic == ONLINE_TOPIC
            )
            return part
        raise StoreError(f"write gave up after {_MAX_ATTEMPTS} claim conflicts")

    @staticmethod
    def _claiming(
        verdicts: Sequence[Verdict], reclaimed: set[SourcePosition], kept: set[SourcePosition]
    ) -> list[Verdict]:
        """The verdicts whose message ids this write claims: online ones not decided at a
        stored claim, one per message id (a second verdict of an id in the same batch is a
        repeat, dropped from ``kept``)."""
        claiming: list[Verdict] = []
        seen: set[str] = set()
        for verdict in verdicts:
            if verdict.position.topic != ONLINE_TOPIC or verdict.position in reclaimed:
                continue
            if verdict.message_id in seen:
                kept.discard(verdict.position)
                continue
            seen.add(verdict.message_id)
            claiming.append(verdict)
        return claiming
