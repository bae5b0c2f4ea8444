"""Moderators' strikes per sender, read for the repeat-offender rule (written by ``review``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from common.strikes import strikes_as_of, tenant_strikes
from engine.sender_strikes import split_strike_key
from engine.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable

__all__ = ["StrikeStore"]


class StrikeStore:
    """Live strike totals through the worker's pool."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def sender_strikes(self, sender_ids: Sequence[str]) -> dict[str, int]:
        """Live strike totals for ``sender_ids`` (strike keys, ``engine.sender_strikes``: a
        sender within its tenant; 0 for senders without strikes)."""
        keys = list(dict.fromkeys(sender_ids))
        try:
            totals = await tenant_strikes(
                self._database.pool(), [split_strike_key(k) for k in keys]
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"strikes read failed: {type(exc).__name__}") from exc
        return dict(zip(keys, totals, strict=True))

    async def strikes_at(
        self, moments: Sequence[tuple[str, datetime]], tenants: Sequence[str] | None = None
    ) -> list[int]:
        """Each ``(sender_id, at)``'s strike total in its tenant (``tenants``, one per moment)
        as it stood at ``at`` (a rescan's view of an old message), in order."""
        try:
            return await strikes_as_of(self._database.pool(), moments, tenants)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"strike history read failed: {type(exc).__name__}") from exc
