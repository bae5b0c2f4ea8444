"""What an autoscaler and an on-call person read first: consumer lag and the oldest record held.

Every ``interval_s`` the probe asks the source for each assigned partition's lag (end offset on
the broker minus the next offset to commit) and exports it as
``modstream_consumer_lag_records{topic, partition}``; a partition revoked since the last round
loses its series, so the sum over workers is the group's lag. It also exports
``modstream_oldest_in_flight_age_seconds`` from the offset tracker: a record that stays in flight
(a batch stuck on the model or on PostgreSQL) shows here long before the lag grows.

A broker that cannot answer leaves the last figures in place and is logged (once per outage):
the lag is a view, never a reason to stop the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from aiokafka.errors import KafkaError

from common.logs import get_logger
from engine.metrics import Metrics
from engine.offsets import OffsetTracker, PartitionKey

__all__ = ["ConsumerLagProbe", "LagSource"]

_log = get_logger(__name__)


class LagSource(Protocol):
    async def lag(self) -> dict[PartitionKey, int]: ...


class ConsumerLagProbe:
    def __init__(
        self,
        source: LagSource,
        tracker: OffsetTracker,
        metrics: Metrics,
        *,
        interval_s: float = 5.0,
        timeout_s: float = 5.0,
    ) -> None:
        self._source = source
        self._tracker = tracker
        self._metrics = metrics
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._exported: set[PartitionKey] = set()
        self._failing = False

    async def observe(self) -> None:
        """One round: export the oldest in-flight age, then each partition's lag."""
        self._metrics.oldest_in_flight_age_seconds.set(self._tracker.oldest_age_s())
        try:
            async with asyncio.timeout(self._timeout_s):
                lag = await self._source.lag()
        except (KafkaError, TimeoutError) as exc:
            if not self._failing:
                _log.warning("consumer_lag_unavailable", error=type(exc).__name__)
            self._failing = True
            return
        self._failing = False
        gauge = self._metrics.consumer_lag_records
        for topic, partition in self._exported - lag.keys():
            with contextlib.suppress(KeyError):
                gauge.remove(topic, str(partition))
        for (topic, partition), records in lag.items():
            gauge.labels(topic, str(partition)).set(records)
        self._exported = set(lag)

    async def run(self, done: asyncio.Event) -> None:
        """Observe every ``interval_s`` until ``done`` is set."""
        while not done.is_set():
            await self.observe()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._interval_s)
