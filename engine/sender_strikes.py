"""Moderators' strikes fed back into the rules: repeat offenders escalate sooner.

Decisions in the review console add weighted, decaying strikes per sender (``sender_strikes``,
see ``review/strikes.py``). Before the rules run on a fetch, the worker looks up the live
totals of that fetch's senders in one query (cached for ``ttl_s``) and puts them in the
message's ``metadata.sender_strikes``, where the ``profile.repeat_offender`` rule reads them. A
value the platform sent is kept when it is higher. Lookup failures never hold up moderation: the
message is evaluated with what the platform sent.

A sender id names a sender within its tenant: strikes are looked up and cached by *strike key*
(:func:`strike_key`), the sender id for the default tenant and ``tenant NUL sender id`` for any
other (no sender id holds a NUL: the decoder refuses it), so strikes given in one tenant never
count in another.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from common.logs import get_logger
from pipelines.messages import ChatMessage
from pipelines.tenants import DEFAULT_TENANT, is_default

__all__ = ["StrikeCache", "StrikeSource", "split_strike_key", "strike_key", "with_strikes"]

_log = get_logger(__name__)
METADATA_KEY = "sender_strikes"
_SEPARATOR = "\x00"


def strike_key(message: ChatMessage) -> str:
    """The key of ``message``'s sender within its tenant (module docs)."""
    if is_default(message.tenant):
        return message.sender_id
    return f"{message.tenant}{_SEPARATOR}{message.sender_id}"


def split_strike_key(key: str) -> tuple[str, str]:
    """``(tenant, sender_id)`` of a :func:`strike_key`."""
    tenant, separator, sender_id = key.partition(_SEPARATOR)
    return (tenant, sender_id) if separator else (DEFAULT_TENANT, key)


class StrikeSource(Protocol):
    async def sender_strikes(self, sender_ids: Sequence[str]) -> dict[str, int]: ...


class StrikeCache:
    def __init__(
        self,
        source: StrikeSource,
        *,
        ttl_s: float = 30.0,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[str, tuple[float, int]] = {}

    def fresh(self, sender_id: str) -> bool:
        """Whether the sender's total (by strike key) was loaded less than ``ttl_s`` ago (no
        look-up needed)."""
        loaded = self._entries.get(sender_id)
        return loaded is not None and self._clock() - loaded[0] <= self._ttl_s

    async def prefetch(self, sender_ids: Iterable[str]) -> None:
        """Load the senders (strike keys) whose entry is missing or older than ``ttl_s`` (one
        query)."""
        now = self._clock()
        stale = sorted(
            {s for s in sender_ids if now - self._entries.get(s, (-1e18, 0))[0] > self._ttl_s}
        )
        if not stale:
            return
        try:
            totals = await self._source.sender_strikes(stale)
        except Exception as exc:  # a down database must not stop moderation
            _log.warning("sender_strikes_unavailable", error=type(exc).__name__)
            return
        if len(self._entries) + len(stale) > self._max_entries:
            self._entries.clear()  # simple bound; entries are cheap to load again
        for sender in stale:
            self._entries[sender] = (now, int(totals.get(sender, 0)))

    def enrich(self, message: ChatMessage) -> ChatMessage:
        """The message with ``metadata.sender_strikes`` raised to the stored total, if higher."""
        entry = self._entries.get(strike_key(message))
        return message if entry is None else with_strikes(message, entry[1])


def with_strikes(message: ChatMessage, total: int) -> ChatMessage:
    """``message`` with ``metadata.sender_strikes`` raised to ``total`` (the stored strikes),
    unless the value the platform sent is already as high."""
    if total <= 0:
        return message
    sent = message.metadata.get(METADATA_KEY)
    if isinstance(sent, int) and not isinstance(sent, bool) and sent >= total:
        return message
    metadata = {**message.metadata, METADATA_KEY: total}
    return dataclasses.replace(message, metadata=metadata)
