"""online.metrics: calls by status code and their latency, collector batch sizes, budget misses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc import aio

from common.api_tokens import digest
from engine.metrics import Metrics
from online.auth import TokenCheck
from online.guard import guarded
from online.metrics import MethodCalls, OnlineMetrics
from tests.unit.online.online_fakes import FakeModel, FakePublisher, FakeStore, make_collector, work

CHECK = "/modstream.v1.ModerationService/CheckMessage"


def _value(metrics: OnlineMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_collector_batches_are_observed_by_kind_and_size() -> None:
    """Ten checks through a collector of at most four per batch: the model histogram counts
    each Triton request and sums to the ten messages; a rule block lands in ``decided``."""
    metrics = OnlineMetrics(Metrics().registry)
    model, store = FakeModel(delay_s=0.02), FakeStore()
    collector = make_collector(model, store, FakePublisher(), max_items=4, metrics=metrics)
    task = asyncio.create_task(collector.run())
    far = time.monotonic() + 10
    answers = [await collector.submit(work(i, f"hello number {i}"), far) for i in range(10)]
    block = await collector.submit(work(10, "kill yourself"), far)
    await asyncio.gather(*answers, block)
    await collector.close()
    await asyncio.wait_for(task, 5)
    name = "modstream_online_batch_size_items"
    assert _value(metrics, f"{name}_count", kind="model") == len(model.calls)
    assert _value(metrics, f"{name}_sum", kind="model") == 10
    assert _value(metrics, f"{name}_sum", kind="decided") == 1


async def test_a_call_that_outlives_its_budget_counts_each_message_as_an_inference_miss() -> None:
    """A model slower than the budget: the one message of the call is an ``inference`` miss."""
    metrics = OnlineMetrics(Metrics().registry)
    model = FakeModel(delay_s=0.5)
    collector = make_collector(model, FakeStore(), FakePublisher(), metrics=metrics)
    task = asyncio.create_task(collector.run())
    await (await collector.submit(work(1, "hello there"), time.monotonic() + 0.05))
    await collector.close()
    await asyncio.wait_for(task, 5)
    assert _value(metrics, "modstream_online_budget_misses_total", stage="inference") == 1
    assert _value(metrics, "modstream_online_budget_misses_total", stage="queued") == 0


async def test_a_budget_spent_before_the_batch_starts_counts_as_a_queued_miss() -> None:
    """With less budget left than ``min_model_s``, the message skips the model: a ``queued``
    miss, and no model call at all."""
    metrics = OnlineMetrics(Metrics().registry)
    model = FakeModel()
    collector = make_collector(
        model, FakeStore(), FakePublisher(), min_model_s=5.0, metrics=metrics
    )
    task = asyncio.create_task(collector.run())
    await (await collector.submit(work(1, "hello there"), time.monotonic() + 1.0))
    await collector.close()
    await asyncio.wait_for(task, 5)
    assert model.calls == []
    assert _value(metrics, "modstream_online_budget_misses_total", stage="queued") == 1


async def _answer(request: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
    if request == b"bad":
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request")
    if request == b"slow":
        await asyncio.sleep(0.3)
    return b"ok"


TOKEN = "msr_platform-token"


class _Platform:
    """A token store knowing one platform token."""

    async def fetchrow(self, query: str, *args: Any) -> Any:
        return {
            "id": 1,
            "name": "chat-server",
            "role": "platform",
            "categories": None,
            "tenants": None,
            "token_sha256": digest(TOKEN),
        }


@pytest.fixture
async def served() -> AsyncIterator[tuple[OnlineMetrics, aio.Channel]]:
    """A real gRPC server on loopback: a guarded CheckMessage (recorded, then the token check)
    and an unguarded health service."""
    metrics = OnlineMetrics(Metrics().registry)
    tokens = TokenCheck(_Platform, cache_s=1)
    server = aio.server()
    handler = grpc.method_handlers_generic_handler(
        "modstream.v1.ModerationService",
        {
            "CheckMessage": grpc.unary_unary_rpc_method_handler(
                guarded(_answer, MethodCalls(metrics, "CheckMessage"), tokens, CHECK)
            )
        },
    )
    health = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(_answer)}
    )
    server.add_generic_rpc_handlers((handler, health))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield metrics, channel
    finally:
        await channel.close()
        await server.stop(None)


def _calls(metrics: OnlineMetrics, code: str) -> float:
    return _value(metrics, "modstream_online_calls_total", method="CheckMessage", code=code)


async def test_every_call_is_counted_by_its_status_code_and_timed(
    served: tuple[OnlineMetrics, aio.Channel],
) -> None:
    """Answered calls count as OK, a handler's abort under its code, and a call the token check
    refuses (it never reaches the handler) as UNAUTHENTICATED; the latency histogram sees all
    four calls, the slow one only in buckets above 0.25 s."""
    metrics, channel = served
    check = channel.unary_unary(CHECK)
    token = (("authorization", f"Bearer {TOKEN}"),)
    assert await check(b"fine", metadata=token) == b"ok"
    assert await check(b"slow", metadata=token) == b"ok"
    with pytest.raises(aio.AioRpcError) as invalid:
        await check(b"bad", metadata=token)
    assert invalid.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(aio.AioRpcError) as refused:
        await check(b"fine")
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    # The server sends a call's status before the guard records the call: on a slow machine
    # the client can see the last status first.
    seconds = "modstream_online_call_seconds_bucket"
    deadline = time.monotonic() + 10.0
    while _value(metrics, seconds, method="CheckMessage", le="+Inf") < 4:
        assert time.monotonic() < deadline, "the four calls were not all recorded"
        await asyncio.sleep(0.01)
    assert _calls(metrics, "OK") == 2
    assert _calls(metrics, "INVALID_ARGUMENT") == 1
    assert _calls(metrics, "UNAUTHENTICATED") == 1
    assert _value(metrics, seconds, method="CheckMessage", le="+Inf") == 4
    assert _value(metrics, seconds, method="CheckMessage", le="0.25") == 3


async def test_health_checks_are_not_counted_as_moderation_calls(
    served: tuple[OnlineMetrics, aio.Channel],
) -> None:
    """Only the guarded methods are recorded: the health service answers without a token and
    counts nowhere."""
    metrics, channel = served
    assert await channel.unary_unary("/grpc.health.v1.Health/Check")(b"x") == b"ok"
    assert metrics.registry.get_sample_value("modstream_online_call_seconds_count") is None
    assert not [
        s for m in metrics.calls_total.collect() for s in m.samples if s.name.endswith("_total")
    ]
