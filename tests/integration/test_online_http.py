"""The online service's HTTP endpoint against the real stack: probes and /metrics."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import wait_until
from tests.integration.online_support import (
    Client,
    make_token,
    online_settings_for,
    request,
    running_service,
)

pytestmark = pytest.mark.integration


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 (loopback)
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def test_calls_are_counted_by_code_and_the_probes_answer(
    database: str, topics: dict[str, str]
) -> None:
    """/healthz and /readyz answer 200 while the service runs with PostgreSQL up; after two
    answered calls and one without a token, /metrics counts 2 OK and 1 UNAUTHENTICATED,
    times all three, and shows the collector's batches."""
    settings = online_settings_for(database, topics)
    token = await make_token(database)
    async with running_service(settings) as service:
        base = f"http://127.0.0.1:{service.http_port}"
        assert (await asyncio.to_thread(_get, f"{base}/healthz"))[0] == 200

        async def ready() -> bool:
            return (await asyncio.to_thread(_get, f"{base}/readyz"))[0] == 200

        await wait_until(ready, 30)
        client, anonymous = Client(service.port or 0, token), Client(service.port or 0, None)
        try:
            await client.check(request("good morning everyone"))
            await client.check(request("FREE MONEY!!! click http://win.example.com now"))
            with pytest.raises(grpc.aio.AioRpcError):
                await anonymous.check(request("hello"))
        finally:
            await client.close()
            await anonymous.close()
        _, text = await asyncio.to_thread(_get, f"{base}/metrics")
    calls = "modstream_online_calls_total"
    assert _value(text, calls, method="CheckMessage", code="OK") == 2
    assert _value(text, calls, method="CheckMessage", code="UNAUTHENTICATED") == 1
    assert _value(text, "modstream_online_call_seconds_count", method="CheckMessage") == 3
    batches = "modstream_online_batch_size_items_sum"
    assert _value(text, batches, kind="model") + _value(text, batches, kind="decided") == 2
    assert "process_resident_memory_bytes" in text
