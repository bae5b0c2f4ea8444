"""Moderators' strikes per sender, read for the repeat-offender rule (written by ``review``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from common.strikes import active_strikes, strikes_as_of
from engine.stores.database import UNAVAILABLE_ERRORS, Database, StoreUnavailable

__all__ = ["StrikeStore"]


class StrikeStore:
    """Live strike totals through the worker's pool."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def sender_strikes(self, sender_ids: Sequence[str]) -> dict[str, int]:
        """Live strike totals for ``sender_ids`` (0 for senders without strikes)."""
        try:
            return await active_strikes(self._database.pool(), sender_ids)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"strikes read failed: {type(exc).__name__}") from exc

    async def strikes_at(self, moments: Sequence[tuple[str, datetime]]) -> list[int]:
        """Each ``(sender_id, at)``'s strike total as it stood at ``at`` (a rescan's view of
        an old message), in order."""
        try:
            return await strikes_as_of(self._database.pool(), moments)
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"strike history read failed: {type(exc).__name__}") from exc
