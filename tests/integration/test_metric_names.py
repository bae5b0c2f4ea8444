"""Every metric the alert rules, the dashboard and the prometheus-adapter rule name is exported
by a live service.

A ``modstream worker``, a ``modstream online`` and a ``modstream review serve`` process run on
this test's database and topics beside the stack's Triton; their ``/metrics`` (and Triton's)
are scraped, and each name a rule or a dashboard query selects must be among what they offer.
A renamed metric, or a rule written for one that was never exported, fails here.
"""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from stack.samples import produce, sample_stream
from stack.settings import StackToolSettings
from tests.integration.conftest import free_ports, wait_until
from tests.promql_names import (
    adapter_expressions,
    dashboard_expressions,
    exported_names,
    recorded_names,
    rule_expressions,
    selector_names,
)

pytestmark = pytest.mark.integration

_STANDARD = {
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "python_gc_collections_total",
}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 (loopback)
            return int(response.status), response.read().decode()
    except OSError:
        return 0, ""


@asynccontextmanager
async def _process(
    argv: list[str], env: dict[str, str], log: Path, ready_url: str
) -> AsyncIterator[None]:
    """Run ``modstream ARGV`` until the block ends; wait until ``ready_url`` answers 200."""
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "modstream.cli", *argv, env=env, stdout=out, stderr=out
        )
    try:

        async def ready() -> bool:
            if process.returncode is not None:
                tail = (await asyncio.to_thread(log.read_text))[-2000:]
                pytest.fail(f"{argv[0]} exited {process.returncode}: {tail}")
            status, _ = await asyncio.to_thread(_get, ready_url)
            return status == 200

        await wait_until(ready, 90, interval_s=0.5)
        yield
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_rules_and_dashboard_name_only_exported_metrics(
    database: str, topics: dict[str, str], tmp_path: Path
) -> None:
    """Scrape the three services and Triton; every selected name is exported by one of them,
    and each service's own registry carries the process and GC collectors."""
    worker_http, online_grpc, online_http, review_http = free_ports(4)
    env = {
        **os.environ,
        "MODSTREAM_POSTGRES__DSN": database,
        "MODSTREAM_KAFKA__INPUT_TOPIC": topics["input_topic"],
        "MODSTREAM_KAFKA__DLQ_TOPIC": topics["dlq_topic"],
        "MODSTREAM_KAFKA__VERDICT_TOPIC": topics["verdict_topic"],
        "MODSTREAM_KAFKA__DECISION_TOPIC": topics["decision_topic"],
        "MODSTREAM_KAFKA__GROUP_ID": topics["group_id"],
        "MODSTREAM_BATCH__MAX_WAIT_S": "0.2",
    }
    bootstrap = env.get("MODSTREAM_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:19092")
    await produce(bootstrap, topics["input_topic"], list(sample_stream(40, id_prefix="names")))
    urls = {
        "worker": f"http://127.0.0.1:{worker_http}",
        "online": f"http://127.0.0.1:{online_http}",
        "review": f"http://127.0.0.1:{review_http}",
    }
    async with AsyncExitStack() as running:
        await running.enter_async_context(
            _process(
                ["worker"],
                {**env, "MODSTREAM_HTTP__PORT": str(worker_http)},
                tmp_path / "worker.log",
                f"{urls['worker']}/readyz",
            )
        )
        await running.enter_async_context(
            _process(
                ["online", "--port", str(online_grpc)],
                {
                    **env,
                    "MODSTREAM_HTTP__PORT": str(online_http),
                    "MODSTREAM_PERSPECTIVE__PORT": "0",
                },
                tmp_path / "online.log",
                f"{urls['online']}/readyz",
            )
        )
        await running.enter_async_context(
            _process(
                ["review", "serve", "--port", str(review_http)],
                env,
                tmp_path / "review.log",
                f"{urls['review']}/readyz",
            )
        )

        async def lag_exported() -> bool:
            _, text = await asyncio.to_thread(_get, f"{urls['worker']}/metrics")
            return "modstream_consumer_lag_records{" in text

        await wait_until(lag_exported, 60, interval_s=0.5)
        scraped = {
            name: exported_names((await asyncio.to_thread(_get, f"{url}/metrics"))[1])
            for name, url in urls.items()
        }
    triton_port = StackToolSettings().stack.triton_metrics_port
    _, triton_text = await asyncio.to_thread(_get, f"http://127.0.0.1:{triton_port}/metrics")
    scraped["triton"] = exported_names(triton_text)

    for service in ("worker", "online", "review"):
        assert scraped[service] >= _STANDARD, service
    assert "modstream_oldest_in_flight_age_seconds" in scraped["worker"]
    assert "modstream_online_calls_total" in scraped["online"]
    assert "modstream_review_queue_items" in scraped["review"]
    assert "nv_inference_queue_duration_us" in scraped["triton"]

    offered = set().union(*scraped.values()) | recorded_names()
    wanted = {
        where: selector_names(expression)
        for where, expression in {
            **rule_expressions(),
            **dashboard_expressions(),
            **adapter_expressions(),
        }.items()
    }
    missing = {where: sorted(names - offered) for where, names in wanted.items() if names - offered}
    assert missing == {}, "metrics no service exports"
