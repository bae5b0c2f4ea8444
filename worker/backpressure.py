"""Backpressure with hysteresis: pause fetching at a high mark, resume below a low mark.

The consume loop asks :meth:`Backpressure.update` with the records in flight after every fetch;
the answer says whether to pause or resume the partitions now. Between the marks nothing
changes, so the consumer does not flap at the limit.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Backpressure", "FlowAction"]


class FlowAction(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    KEEP = "keep"


class Backpressure:
    def __init__(self, high_records: int, resume_ratio: float) -> None:
        if high_records < 1 or not 0.0 < resume_ratio < 1.0:
            raise ValueError("high_records must be >= 1 and 0 < resume_ratio < 1")
        self.high_records = high_records
        self.low_records = int(high_records * resume_ratio)
        self.paused = False

    def update(self, in_flight_records: int) -> FlowAction:
        """The action for this many records in flight (and remember the new state)."""
        if not self.paused and in_flight_records >= self.high_records:
            self.paused = True
            return FlowAction.PAUSE
        if self.paused and in_flight_records <= self.low_records:
            self.paused = False
            return FlowAction.RESUME
        return FlowAction.KEEP
