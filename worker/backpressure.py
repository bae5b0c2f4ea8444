"""Backpressure with hysteresis: pause fetching at a high mark, resume below a low mark.

The consume loop asks :meth:`Backpressure.update` with the records and bytes in flight after
every fetch; the answer says whether to pause or resume the partitions now. Either limit pauses
(a count alone would let a storm of near-limit records hold gigabytes); both must fall below
their low marks to resume. Between the marks nothing changes, so the consumer does not flap.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Backpressure", "FlowAction"]


class FlowAction(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    KEEP = "keep"


class Backpressure:
    def __init__(
        self, high_records: int, resume_ratio: float, high_bytes: int | None = None
    ) -> None:
        if high_records < 1 or not 0.0 < resume_ratio < 1.0:
            raise ValueError("high_records must be >= 1 and 0 < resume_ratio < 1")
        if high_bytes is not None and high_bytes < 1:
            raise ValueError("high_bytes must be >= 1 (or None for no byte limit)")
        self.high_records = high_records
        self.low_records = int(high_records * resume_ratio)
        self.high_bytes = high_bytes
        self.low_bytes = int(high_bytes * resume_ratio) if high_bytes is not None else None
        self.paused = False

    def update(self, in_flight_records: int, in_flight_bytes: int = 0) -> FlowAction:
        """The action for this much in flight (and remember the new state)."""
        over = in_flight_records >= self.high_records or (
            self.high_bytes is not None and in_flight_bytes >= self.high_bytes
        )
        under = in_flight_records <= self.low_records and (
            self.low_bytes is None or in_flight_bytes <= self.low_bytes
        )
        if not self.paused and over:
            self.paused = True
            return FlowAction.PAUSE
        if self.paused and under:
            self.paused = False
            return FlowAction.RESUME
        return FlowAction.KEEP
