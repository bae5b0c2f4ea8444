"""Which offsets are safe to commit: the lowest offset below which every record is handled.

Records complete out of order (rule verdicts flush before model batches, batches overlap), so a
partition's commit point is the first offset that is still pending. ``durable_point`` never passes
an unfinished record; ``point_with`` answers "what would it be if these offsets were durable too",
which the verdict batch store writes in the same transaction that makes them durable.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pipelines.messages import PartitionKey

__all__ = ["OffsetTracker", "PartitionKey"]


@dataclass(slots=True)
class _PartitionState:
    pending: deque[int] = field(default_factory=deque)
    """Offsets started and not yet durable, in the order they were fetched (ascending)."""
    durable: set[int] = field(default_factory=set)
    """Durable offsets still behind an earlier pending one."""
    next_offset: int | None = None
    """One past the highest offset started, the commit point when nothing is pending."""
    sizes: dict[int, int] = field(default_factory=dict)
    """Bytes of each record not yet durable (key plus value), for the memory bound."""
    started_at: dict[int, float] = field(default_factory=dict)
    """When each record not yet durable was started (the tracker's clock), for its age."""


class OffsetTracker:
    """Per-partition bookkeeping of in-flight records. Not thread-safe; one event loop owns it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._parts: dict[PartitionKey, _PartitionState] = {}
        self._bytes = 0
        self._clock = clock

    def start(self, key: PartitionKey, offset: int, size_bytes: int = 0) -> None:
        """Register a fetched record of ``size_bytes``. Offsets of one partition must arrive in
        ascending order."""
        state = self._parts.setdefault(key, _PartitionState())
        if state.next_offset is not None and offset < state.next_offset:
            raise ValueError(f"{key}: offset {offset} is behind {state.next_offset}")
        state.pending.append(offset)
        state.started_at[offset] = self._clock()
        state.next_offset = offset + 1
        if size_bytes:
            state.sizes[offset] = size_bytes
            self._bytes += size_bytes

    def mark_durable(self, key: PartitionKey, offsets: Iterable[int]) -> None:
        """Records whose verdict is stored (or that are dead-lettered). Unknown keys are ignored:
        the partition may have been revoked while its batch was in flight."""
        state = self._parts.get(key)
        if state is None:
            return
        if not state.pending:
            return
        offsets = list(offsets)
        for offset in offsets:
            self._bytes -= state.sizes.pop(offset, 0)
            state.started_at.pop(offset, None)
        head = state.pending[0]
        state.durable.update(o for o in offsets if o >= head)
        while state.pending and state.pending[0] in state.durable:
            state.durable.discard(state.pending.popleft())

    def durable_point(self, key: PartitionKey) -> int | None:
        """The offset to commit (next to read), or ``None`` when nothing was seen."""
        state = self._parts.get(key)
        if state is None:
            return None
        return state.pending[0] if state.pending else state.next_offset

    def point_with(self, key: PartitionKey, offsets: Iterable[int]) -> int | None:
        """The commit point if ``offsets`` were durable as well; does not change the tracker."""
        state = self._parts.get(key)
        if state is None:
            return None
        extra = set(offsets)
        for offset in state.pending:
            if offset not in state.durable and offset not in extra:
                return offset
        return state.next_offset

    def pending_in(self, keys: Iterable[PartitionKey]) -> int:
        """Records not yet durable in the given partitions."""
        return sum(len(self._parts[k].pending) for k in keys if k in self._parts)

    def in_flight(self) -> int:
        """Records started and not yet durable, over every partition."""
        return sum(len(s.pending) for s in self._parts.values())

    def in_flight_bytes(self) -> int:
        """Bytes of the records started and not yet durable, over every partition."""
        return self._bytes

    def oldest_age_s(self) -> float:
        """Seconds since the oldest record still in flight was started (0 when none is).

        A partition's oldest record is its first pending offset: offsets start in ascending
        order, and the head is popped as soon as it is durable."""
        starts = [
            state.started_at[state.pending[0]] for state in self._parts.values() if state.pending
        ]
        return max(0.0, self._clock() - min(starts)) if starts else 0.0

    def forget(self, key: PartitionKey) -> None:
        """Drop a revoked partition's state."""
        state = self._parts.pop(key, None)
        if state is not None:
            self._bytes -= sum(state.sizes.values())

    def partitions(self) -> list[PartitionKey]:
        return list(self._parts)
