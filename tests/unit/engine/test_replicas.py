"""Tests for the Triton replica pool (engine.replicas through engine.triton): round-robin
over healthy replicas, retries on another replica, per-replica breakers, probing and metrics;
replicas that follow a DNS name (``triton.grpc_dns``), join, and leave without failing a call."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pydantic
import pytest
from prometheus_client import CollectorRegistry
from tritonclient.utils import InferenceServerException

import engine.triton as inference_module
from engine.breaker import BreakerState
from engine.inference import InferenceUnavailable
from engine.metrics import Metrics, ReplicaMetrics
from engine.replica_dns import ReplicaLookupFailed
from engine.replicas import Replica
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient
from pipelines.scores import INTENT_LABELS, MODEL_OUTPUTS, SENTIMENT_LABELS, TOXICITY_LABELS
from worker.settings import WorkerSettings
from worker.watchers import watch_breaker

UNAVAILABLE = "StatusCode.UNAVAILABLE"
URLS = ("a:8001", "b:8001", "c:8001")


class _Meta:
    model_version = "1"


class _Response:
    def __init__(self, n: int, served_by: str) -> None:
        self.n = n
        self.served_by = served_by

    def as_numpy(self, name: str) -> np.ndarray[Any, Any] | None:
        if name not in MODEL_OUTPUTS:  # the fake model has only the required outputs
            return None
        width = {"SENTIMENT": SENTIMENT_LABELS, "INTENT": INTENT_LABELS}.get(name, TOXICITY_LABELS)
        return np.full((self.n, len(width)), 1.0 / len(width))

    def get_response(self) -> _Meta:
        return _Meta()


class FakeReplica:
    """One fake Triton server: answers, or fails with UNAVAILABLE while ``down``."""

    def __init__(self, url: str, log: list[str], timeouts: list[float] | None = None) -> None:
        self.url = url
        self.log = log
        self.timeouts = [] if timeouts is None else timeouts
        self.down = False
        self.hang = False
        self.unloaded = False
        self.delay_s = 0.0
        self.ready = True
        self.ready_calls = 0
        self.gate: asyncio.Event | None = None
        self.closed = False

    async def infer(self, model_name: str, inputs: list[Any], **kwargs: Any) -> _Response:
        self.log.append(self.url)
        if self.gate is not None:
            await self.gate.wait()
        if self.unloaded:
            raise InferenceServerException("unknown model", status="StatusCode.NOT_FOUND")
        self.timeouts.append(float(kwargs["client_timeout"]))
        if self.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay_s)
        if self.down:
            raise InferenceServerException("down", status=UNAVAILABLE)
        return _Response(int(inputs[0].shape()[0]), self.url)

    async def is_server_ready(self, **_: Any) -> bool:
        self.ready_calls += 1
        if self.hang:
            await asyncio.Event().wait()
        return self.ready

    async def is_model_ready(self, *_: Any, **__: Any) -> bool:
        return self.ready

    async def get_model_metadata(self, *_: Any, **__: Any) -> SimpleNamespace:
        """The model's outputs: the three required ones (these tests are about routing)."""
        return SimpleNamespace(outputs=[SimpleNamespace(name=name) for name in MODEL_OUTPUTS])

    async def close(self) -> None:
        self.closed = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Rig:
    """A client over fake replicas, with a fake clock and its own metrics registry."""

    def __init__(self, urls: tuple[str, ...] = URLS, **settings: Any) -> None:
        self.log: list[str] = []
        self.timeouts: list[float] = []
        self.fakes = {url: FakeReplica(url, self.log, self.timeouts) for url in urls}
        self.clock = FakeClock()
        self.registry = CollectorRegistry()
        options: dict[str, Any] = {
            "grpc_urls": urls,
            "breaker_failure_threshold": 1,
            "breaker_reset_s": 5.0,
            **settings,
        }
        self.client = TritonModerationClient(
            TritonSettings(**options),
            client_factory=lambda **o: self.fakes[o["url"]],
            clock=self.clock,
            metrics=ReplicaMetrics(self.registry),
        )

    def replica(self, url: str) -> Replica:
        return next(r for r in self.client.breaker.replicas if r.url == url)

    def state(self, url: str) -> BreakerState:
        return self.replica(url).breaker.state

    def pool_state(self) -> BreakerState:
        return self.client.breaker.state

    def sample(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    async def calls(self, n: int) -> None:
        for _ in range(n):
            await self.client.infer(["hi"])


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries in these tests must not sleep."""
    monkeypatch.setattr(inference_module, "backoff_s", lambda *_a, **_k: 0.0)


async def _started(**settings: Any) -> Rig:
    rig = Rig(**settings)
    await rig.client.start(wait_ready=False)
    return rig


async def test_calls_go_round_robin() -> None:
    """Healthy replicas take calls in turn: a, b, c, a, b, c."""
    rig = await _started()
    await rig.calls(6)
    assert rig.log == ["a:8001", "b:8001", "c:8001"] * 2


async def test_open_replica_is_skipped() -> None:
    """A replica whose breaker is open gets no calls; the others share them in turn."""
    rig = await _started()
    rig.replica("b:8001").breaker.trip()
    await rig.calls(4)
    assert rig.log == ["a:8001", "c:8001", "a:8001", "c:8001"]
    assert rig.pool_state() is BreakerState.CLOSED


async def test_retry_lands_on_another_replica() -> None:
    """A call that fails with UNAVAILABLE is retried on the next replica, and succeeds there."""
    rig = await _started(breaker_failure_threshold=5)
    rig.fakes["a:8001"].down = True
    result = await rig.client.infer(["hi", "there"])
    assert len(result.scores) == 2
    assert rig.log == ["a:8001", "b:8001"]
    assert rig.state("a:8001") is BreakerState.CLOSED  # one failure, threshold 5


async def test_replica_without_the_model_is_retried_elsewhere() -> None:
    """NOT_FOUND (a replica shutting down has unloaded its model) goes to another replica and
    counts against that replica's breaker."""
    rig = await _started(breaker_failure_threshold=1)
    rig.fakes["a:8001"].unloaded = True
    result = await rig.client.infer(["hi"])
    assert len(result.scores) == 1
    assert rig.log == ["a:8001", "b:8001"]
    assert rig.state("a:8001") is BreakerState.OPEN


async def test_concurrent_retry_avoids_the_replica_that_failed() -> None:
    """A retry skips the replica its call already tried even when round-robin points back at it
    (another call took the next turn meanwhile)."""
    rig = await _started(grpc_urls=("a:8001", "b:8001"), breaker_failure_threshold=5)
    rig.fakes["a:8001"].down = True
    rig.fakes["a:8001"].delay_s = 0.05
    await asyncio.gather(rig.client.infer(["one"]), rig.client.infer(["two"]))
    assert rig.log == ["a:8001", "b:8001", "b:8001"]


async def test_failed_replica_opens_and_traffic_moves_on() -> None:
    """A down replica trips its own breaker; callers see no error and later calls skip it."""
    rig = await _started()
    rig.fakes["b:8001"].down = True
    await rig.calls(5)
    assert rig.state("b:8001") is BreakerState.OPEN
    assert rig.log.count("b:8001") == 1
    assert rig.pool_state() is BreakerState.CLOSED


async def test_half_open_probe_returns_a_replica() -> None:
    """After the reset time the model-ready probe closes a ready replica, which gets calls again;
    a replica still not ready stays out for another reset period."""
    rig = await _started()
    rig.replica("b:8001").breaker.trip()
    rig.fakes["b:8001"].ready = False
    assert await rig.client.probe()
    assert rig.fakes["b:8001"].ready_calls == 0  # open, before the reset time: no probe
    rig.clock.now += 5.0
    assert await rig.client.probe()
    assert rig.fakes["b:8001"].ready_calls == 1
    assert rig.state("b:8001") is BreakerState.OPEN
    rig.fakes["b:8001"].ready = True
    rig.clock.now += 5.0
    assert await rig.client.probe()
    assert rig.state("b:8001") is BreakerState.CLOSED
    rig.log.clear()
    await rig.calls(3)
    assert sorted(rig.log) == sorted(URLS)


async def test_probe_makes_no_call_while_every_replica_is_closed() -> None:
    """Probing a healthy pool asks no replica anything."""
    rig = await _started()
    assert await rig.client.probe()
    assert all(fake.ready_calls == 0 for fake in rig.fakes.values())


async def test_every_breaker_open_is_unavailable_without_calls() -> None:
    """With every replica's breaker open the pool fails fast: InferenceUnavailable, no call."""
    rig = await _started()
    for fake in rig.fakes.values():
        fake.down = True
    with pytest.raises(InferenceUnavailable):
        await rig.client.infer(["hi"])
    assert rig.pool_state() is BreakerState.OPEN
    rig.log.clear()
    with pytest.raises(InferenceUnavailable, match="every replica"):
        await rig.client.infer(["hi"])
    assert rig.log == []
    assert not await rig.client.probe()


async def test_pool_is_half_open_then_a_call_probes_one_replica() -> None:
    """With no replica closed and one half-open, the next call goes to it and closes it."""
    rig = await _started()
    for replica in rig.client.breaker.replicas:
        replica.breaker.trip()
    rig.clock.now += 5.0
    assert rig.pool_state() is BreakerState.HALF_OPEN
    await rig.client.infer(["hi"])
    assert len(rig.log) == 1
    assert rig.state(rig.log[0]) is BreakerState.CLOSED
    assert rig.pool_state() is BreakerState.CLOSED


async def test_cancelled_probe_call_frees_the_half_open_slot() -> None:
    """A call that held a replica's half-open slot and was cancelled does not keep it."""
    rig = await _started(grpc_urls=("a:8001",))
    replica = rig.replica("a:8001")
    replica.breaker.trip()
    rig.clock.now += 5.0
    rig.fakes["a:8001"].hang = True
    call = asyncio.create_task(rig.client.infer(["hi"]))
    await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert replica.breaker.allow()


async def test_cancelled_probe_frees_the_half_open_slot() -> None:
    """A model-ready probe cancelled mid-way leaves the replica probeable again."""
    rig = await _started(grpc_urls=("a:8001",))
    replica = rig.replica("a:8001")
    replica.breaker.trip()
    rig.clock.now += 5.0
    rig.fakes["a:8001"].hang = True
    probe = asyncio.create_task(rig.client.probe())
    await asyncio.sleep(0.01)
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert replica.breaker.allow()


async def test_retries_share_one_deadline() -> None:
    """Each retry gets only what is left of ``request_timeout_s``; past it the call gives up."""
    rig = await _started(breaker_failure_threshold=5, request_timeout_s=0.3, max_attempts=10)
    for fake in rig.fakes.values():
        fake.down = True
        fake.delay_s = 0.12
    with pytest.raises(InferenceUnavailable):
        await rig.client.infer(["hi"])
    timeouts = rig.timeouts
    assert 2 <= len(timeouts) < 10  # the deadline stopped it, not max_attempts
    assert timeouts[0] <= 0.3
    assert timeouts == sorted(timeouts, reverse=True)
    assert timeouts[-1] <= 0.3 - 0.12


async def test_wait_ready_opens_replicas_that_are_not_ready() -> None:
    """Start-up goes on once one replica is ready; the others start with their breaker open."""
    rig = Rig()
    rig.fakes["c:8001"].ready = False
    await rig.client.start(wait_ready=True)
    assert rig.state("a:8001") is BreakerState.CLOSED
    assert rig.state("c:8001") is BreakerState.OPEN
    await rig.calls(4)
    assert "c:8001" not in rig.log


async def test_wait_ready_fails_when_no_replica_is_ready() -> None:
    """No ready replica within the timeout raises InferenceUnavailable naming the addresses."""
    rig = Rig()
    for fake in rig.fakes.values():
        fake.ready = False
    await rig.client.start(wait_ready=False)
    with pytest.raises(InferenceUnavailable, match="a:8001"):
        await rig.client.wait_ready(0.0)


async def test_metrics_per_replica() -> None:
    """Calls, failures, latency and breaker state are counted per replica (label ``replica``)."""
    rig = await _started()
    rig.fakes["b:8001"].down = True
    await rig.calls(3)
    calls = "modstream_inference_replica_calls_total"
    assert rig.sample(calls, replica="a:8001") == 2
    assert rig.sample(calls, replica="b:8001") == 1
    assert rig.sample(calls, replica="c:8001") == 1
    failures = "modstream_inference_replica_failures_total"
    assert rig.sample(failures, replica="b:8001", error="unavailable") == 1
    assert rig.sample(failures, replica="a:8001", error="unavailable") == 0
    latency = "modstream_inference_replica_call_seconds_count"
    assert rig.sample(latency, replica="a:8001") == 2
    state = "modstream_inference_replica_breaker_state"
    assert rig.sample(state, replica="b:8001", state="open") == 1
    assert rig.sample(state, replica="b:8001", state="closed") == 0
    assert rig.sample(state, replica="a:8001", state="closed") == 1
    rig.clock.now += 5.0
    rig.fakes["b:8001"].ready = False
    await rig.client.probe()  # refreshes the gauges: b was half-open, probed, open again
    assert rig.sample(state, replica="b:8001", state="open") == 1


async def test_single_url_setting_still_works() -> None:
    """``triton.grpc_url`` alone is a pool of one: one channel to it, its calls, its breaker."""
    built: list[str] = []
    log: list[str] = []

    def factory(**options: Any) -> FakeReplica:
        built.append(options["url"])
        return FakeReplica(options["url"], log)

    client = TritonModerationClient(TritonSettings(grpc_url="solo:8001"), client_factory=factory)
    await client.start(wait_ready=False)
    await client.infer(["hi"])
    await client.infer(["hi"])
    assert built == ["solo:8001"]
    assert log == ["solo:8001", "solo:8001"]
    assert [r.url for r in client.breaker.replicas] == ["solo:8001"]
    assert TritonSettings().model_copy(update={"grpc_url": "x:1"}).replica_urls == ["x:1"]


def test_grpc_urls_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """MODSTREAM_TRITON__GRPC_URLS takes a JSON list of addresses."""
    for name in list(os.environ):
        if name.startswith("MODSTREAM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MODSTREAM_TRITON__GRPC_URLS", '["a:8001","b:8001"]')
    assert WorkerSettings().triton.replica_urls == ["a:8001", "b:8001"]


def test_conflicting_or_duplicate_urls_are_refused() -> None:
    """Both grpc_url and grpc_urls, a repeated address or an empty one fail validation."""
    with pytest.raises(pydantic.ValidationError, match="not both"):
        TritonSettings(grpc_url="x:1", grpc_urls=("a:1",))
    with pytest.raises(pydantic.ValidationError, match="twice"):
        TritonSettings(grpc_urls=("a:1", "a:1"))
    with pytest.raises(pydantic.ValidationError, match="empty"):
        TritonSettings(grpc_urls=("a:1", " "))


async def test_worker_probes_a_half_open_replica_while_the_pool_is_closed() -> None:
    """The worker's breaker watcher probes replicas even while others serve, so one returns."""
    metrics = Metrics()
    log: list[str] = []
    fakes = {url: FakeReplica(url, log) for url in URLS[:2]}
    clock = FakeClock()
    client = TritonModerationClient(
        TritonSettings(grpc_urls=URLS[:2], breaker_reset_s=5.0),
        client_factory=lambda **o: fakes[o["url"]],
        clock=clock,
        metrics=metrics.replicas,
    )
    await client.start(wait_ready=False)
    (_, b) = client.breaker.replicas
    b.breaker.trip()
    clock.now += 5.0
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_breaker(client, metrics, done))
    async with asyncio.timeout(5.0):
        while fakes["b:8001"].ready_calls == 0:  # noqa: ASYNC110 (nothing signals the probe)
            await asyncio.sleep(0.01)
    done.set()
    await watcher
    assert b.breaker.state is BreakerState.CLOSED
    labels = {"replica": "b:8001", "state": "closed"}
    state = "modstream_inference_replica_breaker_state"
    assert metrics.registry.get_sample_value(state, labels) == 1
    assert metrics.registry.get_sample_value("modstream_inference_breaker_open") == 0


# --- replicas behind a DNS name ------------------------------------------------------------


class Names:
    """A resolver whose answer the test changes; ``None`` answers with a lookup failure."""

    def __init__(self, *addresses: str) -> None:
        self.addresses: list[str] | None = list(addresses)
        self.lookups = 0

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.lookups += 1
        if self.addresses is None:
            raise ReplicaLookupFailed(f"{host}: no answer")
        return list(self.addresses)


class DnsRig:
    """A client on ``triton-replicas:8001`` whose addresses come from :class:`Names`; each
    address dialled gets a fake replica of its own."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.log: list[str] = []
        self.fakes: dict[str, FakeReplica] = {}
        self.clock = FakeClock()
        self.registry = CollectorRegistry()
        self.client = TritonModerationClient(
            TritonSettings(grpc_dns="triton-replicas:8001", dns_refresh_s=5.0),
            client_factory=self._dial,
            clock=self.clock,
            metrics=ReplicaMetrics(self.registry),
            resolver=names,
        )

    def _dial(self, **options: Any) -> FakeReplica:
        url = options["url"]
        assert url not in self.fakes or self.fakes[url].closed, f"{url} dialled twice"
        self.fakes[url] = FakeReplica(url, self.log)
        return self.fakes[url]

    def urls(self) -> list[str]:
        return [replica.url for replica in self.client.breaker.replicas]

    async def refresh(self) -> None:
        """Let the refresh interval pass and probe, as the services' loops do."""
        self.clock.now += 5.0
        await self.client.probe()

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


async def _until_called(log: list[str]) -> None:
    async with asyncio.timeout(5.0):
        while not log:  # noqa: ASYNC110 (the fake records a call when it starts)
            await asyncio.sleep(0)


async def test_the_pool_is_every_address_the_name_has_and_calls_go_round_robin() -> None:
    """Each resolved address is a replica with its own channel; calls take turns over them."""
    rig = DnsRig(Names("10.0.0.2", "10.0.0.1"))
    await rig.client.start(wait_ready=False)
    assert rig.urls() == ["10.0.0.1:8001", "10.0.0.2:8001"]
    for _ in range(4):
        await rig.client.infer(["hi"])
    assert rig.log == ["10.0.0.1:8001", "10.0.0.2:8001"] * 2
    assert rig.sample("modstream_inference_replicas") == 2


async def test_a_new_address_gets_its_share_after_the_next_lookup() -> None:
    """A pod added behind the name is dialled at the next lookup (once ``dns_refresh_s`` has
    passed) and takes one call in three from then on; replicas already known keep their
    channel."""
    names = Names("10.0.0.1", "10.0.0.2")
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    first = dict(rig.fakes)
    names.addresses = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    await rig.client.probe()  # not due yet: nothing changes
    assert len(rig.urls()) == 2
    await rig.refresh()
    assert rig.urls() == ["10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"]
    assert all(rig.fakes[url] is fake for url, fake in first.items())
    rig.log.clear()
    for _ in range(30):
        await rig.client.infer(["hi"])
    assert {url: rig.log.count(url) for url in rig.urls()} == dict.fromkeys(rig.urls(), 10)
    assert rig.sample("modstream_inference_replicas") == 3


async def test_lookups_happen_once_per_refresh_interval() -> None:
    """Probing every second looks the name up only when ``dns_refresh_s`` has passed."""
    names = Names("10.0.0.1")
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    for _ in range(4):
        rig.clock.now += 1.0
        await rig.client.probe()
    assert names.lookups == 1
    rig.clock.now += 1.0
    await rig.client.probe()
    assert names.lookups == 2


async def test_a_replica_that_leaves_is_drained_without_failing_its_call() -> None:
    """An address gone from the name is never picked again, but its channel stays open until
    the call it carries has answered; then it is closed and its series are dropped."""
    names = Names("10.0.0.1", "10.0.0.2")
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    leaving = rig.fakes["10.0.0.1:8001"]
    leaving.gate = asyncio.Event()
    in_flight = asyncio.create_task(rig.client.infer(["hi"]))
    await _until_called(rig.log)
    assert rig.log == ["10.0.0.1:8001"]
    names.addresses = ["10.0.0.2"]
    await rig.refresh()
    assert rig.urls() == ["10.0.0.2:8001"]
    for _ in range(3):
        await rig.client.infer(["hi"])
    assert rig.log[1:] == ["10.0.0.2:8001"] * 3
    assert not leaving.closed
    leaving.gate.set()
    result = await in_flight
    assert len(result.scores) == 1
    await rig.client.probe()  # not a lookup: only the drained channel is closed
    assert leaving.closed
    calls = "modstream_inference_replica_calls_total"
    assert rig.sample(calls, replica="10.0.0.1:8001") is None
    assert rig.sample(calls, replica="10.0.0.2:8001") == 3
    assert rig.sample("modstream_inference_replicas") == 1


async def test_an_address_back_before_its_channel_closed_keeps_it() -> None:
    """A pod that drops out of the answer and is back at the next lookup, its call still
    running, is the same replica: no second channel."""
    names = Names("10.0.0.1", "10.0.0.2")
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    back = rig.fakes["10.0.0.1:8001"]
    back.gate = asyncio.Event()
    in_flight = asyncio.create_task(rig.client.infer(["hi"]))
    await _until_called(rig.log)
    names.addresses = ["10.0.0.2"]
    await rig.refresh()
    names.addresses = ["10.0.0.1", "10.0.0.2"]
    await rig.refresh()
    back.gate.set()
    await in_flight
    assert rig.fakes["10.0.0.1:8001"] is back
    assert not back.closed
    assert sorted(rig.urls()) == ["10.0.0.1:8001", "10.0.0.2:8001"]


async def test_a_failed_lookup_keeps_the_replicas_known() -> None:
    """A resolver failure (a DNS hiccup) changes nothing: the breakers judge the replicas."""
    names = Names("10.0.0.1", "10.0.0.2")
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    names.addresses = None
    await rig.refresh()
    assert rig.urls() == ["10.0.0.1:8001", "10.0.0.2:8001"]
    await rig.client.infer(["hi"])


async def test_no_address_at_start_is_unavailable_until_one_appears() -> None:
    """Before any pod is ready the name has no address: calls fail fast as unavailable (the
    services fall back to rules-only verdicts), and waiting for readiness keeps looking."""
    names = Names()
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    with pytest.raises(InferenceUnavailable, match="no replica found at triton-replicas:8001"):
        await rig.client.infer(["hi"])
    assert rig.client.state is BreakerState.OPEN
    with pytest.raises(InferenceUnavailable, match="triton-replicas:8001"):
        await rig.client.wait_ready(0.0)
    names.addresses = ["10.0.0.4"]
    await rig.client.wait_ready(0.0)
    assert rig.urls() == ["10.0.0.4:8001"]
    await rig.client.infer(["hi"])
    assert rig.log == ["10.0.0.4:8001"]


async def test_stop_closes_replicas_still_draining() -> None:
    """Stopping the client closes every channel, those of replicas still draining too."""
    names = Names("10.0.0.1", "10.0.0.2")
    rig = DnsRig(names)
    await rig.client.start(wait_ready=False)
    leaving = rig.fakes["10.0.0.1:8001"]
    leaving.gate = asyncio.Event()
    in_flight = asyncio.create_task(rig.client.infer(["hi"]))
    await _until_called(rig.log)
    names.addresses = ["10.0.0.2"]
    await rig.refresh()
    assert not leaving.closed
    await rig.client.stop()
    assert leaving.closed
    assert rig.fakes["10.0.0.2:8001"].closed
    in_flight.cancel()
    with pytest.raises(asyncio.CancelledError):
        await in_flight


def test_dns_and_fixed_addresses_are_refused_together() -> None:
    """``grpc_dns`` replaces ``grpc_url`` / ``grpc_urls``: setting both is a settings error,
    and a ``grpc_dns`` without a port is refused at load."""
    with pytest.raises(pydantic.ValidationError, match="not both"):
        TritonSettings(grpc_dns="triton-replicas:8001", grpc_url="triton:8001")
    with pytest.raises(pydantic.ValidationError, match="not both"):
        TritonSettings(grpc_dns="triton-replicas:8001", grpc_urls=("a:1",))
    with pytest.raises(pydantic.ValidationError, match="host:port"):
        TritonSettings(grpc_dns="triton-replicas")
