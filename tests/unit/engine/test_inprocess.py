"""The in-process backend: off the event loop, with the Triton client's breaker, deadline,
metrics and provenance, over a fake model loader (the real model runs in the integration
tests)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from engine.breaker import BreakerState
from engine.inference import InferenceRejected, InferenceUnavailable
from engine.inprocess import REPLICA, InProcessModerationClient
from engine.metrics import ReplicaMetrics
from engine.settings import InferenceSettings, TritonSettings
from modelhost.python_backend import ModelLoadError, ModelRefused


class FakeModel:
    """Uniform rows after ``delay_s``; refuses texts ``"refuse"``; counts concurrent calls."""

    running = 0
    most_at_once = 0
    lock = threading.Lock()

    def __init__(
        self, version: str = "7", delay_s: float = 0.0, harms: tuple[float, ...] | None = None
    ) -> None:
        self.version = version
        self.delay_s = delay_s
        self.harms = harms
        self.closed = False

    def infer(self, texts: list[str]) -> dict[str, Any]:
        with FakeModel.lock:
            FakeModel.running += 1
            FakeModel.most_at_once = max(FakeModel.most_at_once, FakeModel.running)
        try:
            time.sleep(self.delay_s)
            if "refuse" in texts:
                raise ModelRefused("no", 3)
            n = len(texts)
            outputs = {
                "SENTIMENT": np.full((n, 3), 1 / 3, np.float32),
                "INTENT": np.full((n, 4), 0.25, np.float32),
                "TOXICITY": np.full((n, 3), 1 / 3, np.float32),
            }
            if self.harms is not None:
                outputs["HARMS"] = np.tile(np.asarray(self.harms, np.float32), (n, 1))
            return outputs
        finally:
            with FakeModel.lock:
                FakeModel.running -= 1

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _client(
    load: Any, *, instances: int = 1, timeout_s: float = 5.0, clock: Clock | None = None
) -> tuple[InProcessModerationClient, ReplicaMetrics]:
    metrics = ReplicaMetrics(CollectorRegistry())
    client = InProcessModerationClient(
        InferenceSettings(backend="inprocess", repository=Path("/repo"), instances=instances),
        TritonSettings(model_version="", request_timeout_s=timeout_s, breaker_failure_threshold=2),
        load=load,
        clock=clock or Clock(),
        metrics=metrics,
    )
    return client, metrics


async def test_scores_carry_the_loaded_version_and_the_calls_are_counted() -> None:
    """Rows per text; provenance is the model name and the version the loader chose; the
    replica metrics count the call under ``inprocess``."""
    asked: list[tuple[Any, ...]] = []

    def load(repository: Path, name: str, version: str, *, instance: int) -> FakeModel:
        asked.append((repository, name, version, instance))
        return FakeModel("7")

    client, metrics = _client(load)
    await client.start()
    try:
        result = await client.infer(["a", "b"])
    finally:
        await client.stop()
    assert asked == [(Path("/repo"), "moderation", "", 0)]
    assert (result.model_name, result.model_version, len(result.scores)) == ("moderation", "7", 2)
    assert metrics.calls_total.labels(REPLICA)._value.get() == 1


async def test_the_event_loop_keeps_running_while_the_model_computes() -> None:
    """A 0.4 s model call leaves the loop free: a 10 ms ticker never waits 100 ms."""
    client, _ = _client(lambda *a, **k: FakeModel(delay_s=0.4))
    await client.start()
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        await client.infer(["x"])
    finally:
        done.set()
        await ticker
        await client.stop()
    assert len(gaps) >= 20
    assert max(gaps) < 0.1


async def test_instances_answer_side_by_side_one_call_each() -> None:
    """Two instances: four calls, never more than two at once, never two on one instance."""
    FakeModel.most_at_once = 0
    client, _ = _client(lambda *a, **k: FakeModel(delay_s=0.1), instances=2)
    await client.start()
    try:
        await asyncio.gather(*(client.infer(["x"]) for _ in range(4)))
    finally:
        await client.stop()
    assert FakeModel.most_at_once == 2


async def test_a_refusal_is_rejected_and_keeps_the_breaker_closed() -> None:
    """The model's error response is ``InferenceRejected``; the model answered, so the
    breaker stays closed."""
    client, metrics = _client(lambda *a, **k: FakeModel())
    await client.start()
    try:
        with pytest.raises(InferenceRejected):
            await client.infer(["refuse"])
        assert client.state is BreakerState.CLOSED
        assert metrics.failures_total.labels(REPLICA, "rejected")._value.get() == 1
    finally:
        await client.stop()


async def test_a_slow_model_misses_its_deadline_and_opens_the_breaker() -> None:
    """Past ``request_timeout_s`` a call is ``InferenceUnavailable``; two such failures open
    the breaker and the next call fails fast; after the reset a probe closes it again."""
    clock = Clock()
    client, _ = _client(lambda *a, **k: FakeModel(delay_s=0.3), timeout_s=0.05, clock=clock)
    await client.start()
    try:
        for _ in range(2):
            with pytest.raises(InferenceUnavailable, match="deadline"):
                await client.infer(["x"])
        assert client.state is BreakerState.OPEN
        started = time.perf_counter()
        with pytest.raises(InferenceUnavailable, match="breaker"):
            await client.infer(["x"])
        assert time.perf_counter() - started < 0.05
        clock.now += 60
        assert await client.probe()
        assert client.state is BreakerState.CLOSED
    finally:
        await client.stop()


async def test_a_failed_load_is_unavailable_and_retried_when_the_breaker_half_opens() -> None:
    """A load error: ``wait_ready`` and calls say why (``InferenceUnavailable``), the breaker is
    open; once it half-opens, a probe loads again and calls go through."""
    clock = Clock()
    attempts: list[int] = []

    def load(*args: Any, **kwargs: Any) -> FakeModel:
        attempts.append(1)
        if len(attempts) == 1:
            raise ModelLoadError("no model 'moderation' in /repo")
        return FakeModel()

    client, _ = _client(load, clock=clock)
    with pytest.raises(InferenceUnavailable, match="no model"):
        await client.start()
    try:
        with pytest.raises(InferenceUnavailable, match="no model"):
            await client.infer(["x"])
        assert client.state is BreakerState.OPEN
        clock.now += 60
        assert not await client.probe()  # starts the second load
        await client.wait_ready(5)
        clock.now += 60
        assert await client.probe()
        assert len((await client.infer(["x"])).scores) == 1
    finally:
        await client.stop()
    assert len(attempts) == 2


async def test_stop_finalizes_every_instance_and_twice_is_safe() -> None:
    """``stop`` closes each instance once; a second ``stop`` does nothing; calls after it are
    unavailable."""
    made: list[FakeModel] = []

    def load(*args: Any, **kwargs: Any) -> FakeModel:
        made.append(FakeModel())
        return made[-1]

    client, _ = _client(load, instances=2)
    await client.start()
    await client.stop()
    await client.stop()
    assert [m.closed for m in made] == [True, True]
    with pytest.raises(InferenceUnavailable):
        await client.infer(["x"])


@pytest.mark.parametrize("harms", [None, (0.5, 0.25, 0.0, 1.0, 0.75)])
async def test_harms_reach_the_scores_when_the_model_gives_them(
    harms: tuple[float, ...] | None,
) -> None:
    """A model answering HARMS gives every row its harms; one without it gives ``harms=None``
    and still scores."""
    client, _ = _client(lambda *_a, **_k: FakeModel("7", harms=harms))
    await client.start()
    try:
        result = await client.infer(["a", "b"])
    finally:
        await client.stop()
    assert [row.harms for row in result.scores] == [harms, harms]


async def test_a_model_without_a_required_output_is_rejected() -> None:
    """A response without TOXICITY breaks the contract: ``InferenceRejected`` naming it."""

    class WithoutToxicity(FakeModel):
        def infer(self, texts: list[str]) -> dict[str, Any]:
            outputs = super().infer(texts)
            del outputs["TOXICITY"]
            return outputs

    client, _ = _client(lambda *_a, **_k: WithoutToxicity("7"))
    await client.start()
    try:
        with pytest.raises(InferenceRejected, match="TOXICITY: missing"):
            await client.infer(["a"])
    finally:
        await client.stop()
