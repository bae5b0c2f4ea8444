"""``python -m bench.triton_queue``: Triton's own queue and compute time per request, on the
real models, with one request in flight and with a worker's ``batch.max_in_flight``.

Queue time per request is what the Triton HorizontalPodAutoscaler scales on (``deploy/k8s``):
``nv_inference_queue_duration_us`` over ``nv_inference_request_success``, read from Triton's
metrics endpoint before and after each run; compute time per request is
``nv_inference_compute_infer_duration_us`` over the same count. A private ``tritonserver`` over
``--repository`` (the built ``model_repository``) runs on free ports for the bench and is stopped
after. Each request is what a worker sends: ``batch.max_items`` chat texts of realistic length
(``bench.pipeline.chat_records``).

Last line: ``in_flight_1_queue_s= in_flight_1_compute_s= in_flight_N_queue_s=
in_flight_N_compute_s= msgs_per_s_N=`` (N is ``--in-flight``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.pipeline import chat_records, free_ports
from common.settings import project_root
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient
from stack import private_triton
from stack.settings import StackSettings
from worker.settings import WorkerSettings

__all__ = ["TritonLoad", "measure"]

_COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
)


@dataclass(frozen=True, slots=True)
class TritonLoad:
    """One run: requests served, seconds queued and computing per request, messages/s."""

    requests: int
    queue_s_per_request: float
    compute_s_per_request: float
    msgs_per_s: float


def _counters(metrics_url: str, model: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url, timeout=5) as response:  # noqa: S310 (loopback)
        text = response.read().decode()
    totals = dict.fromkeys(_COUNTERS, 0.0)
    for family in text_string_to_metric_families(text):
        # Triton's counters carry no _total suffix; the parser adds one to their samples.
        if family.name in totals:
            totals[family.name] += sum(
                s.value for s in family.samples if s.labels.get("model") == model
            )
    return totals


async def measure(
    grpc_url: str, metrics_url: str, texts: list[str], batch_items: int, in_flight: int
) -> TritonLoad:
    """Send ``texts`` in requests of ``batch_items``, ``in_flight`` at a time; Triton's view."""
    settings = TritonSettings(grpc_url=grpc_url, request_timeout_s=300.0)
    batches = [texts[i : i + batch_items] for i in range(0, len(texts), batch_items)]
    gate = asyncio.Semaphore(in_flight)
    async with TritonModerationClient(settings) as client:
        await client.infer(batches[0])  # warm-up, not counted
        before = await asyncio.to_thread(_counters, metrics_url, settings.model_name)

        async def one(batch: list[str]) -> None:
            async with gate:
                await client.infer(batch)

        started = time.perf_counter()
        await asyncio.gather(*(one(b) for b in batches))
        elapsed = time.perf_counter() - started
        after = await asyncio.to_thread(_counters, metrics_url, settings.model_name)
    delta = {name: after[name] - before[name] for name in _COUNTERS}
    requests = max(1.0, delta["nv_inference_request_success"])
    return TritonLoad(
        requests=int(delta["nv_inference_request_success"]),
        queue_s_per_request=delta["nv_inference_queue_duration_us"] / 1e6 / requests,
        compute_s_per_request=delta["nv_inference_compute_infer_duration_us"] / 1e6 / requests,
        msgs_per_s=len(texts) / elapsed,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.triton_queue", description=__doc__)
    parser.add_argument("--repository", type=Path, default=project_root() / "model_repository")
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--in-flight", type=int, default=WorkerSettings().batch.max_in_flight)
    args = parser.parse_args(argv)
    batch_items = WorkerSettings().batch.max_items
    records = chat_records(args.messages, seed=2026, prefix="tq")
    texts = [str(orjson.loads(r.value)["text"]) for r in records]
    http, grpc, metrics = free_ports(3)
    state = StackSettings().state_dir / "bench-triton-queue"
    with private_triton(args.repository.resolve(), state, (http, grpc, metrics)) as server:
        metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        runs = {}
        for in_flight in (1, args.in_flight):
            load = asyncio.run(measure(server.endpoint, metrics_url, texts, batch_items, in_flight))
            runs[in_flight] = load
            print(
                f"in flight {in_flight}: {load.requests} requests of {batch_items}, queue "
                f"{load.queue_s_per_request * 1000:.1f} ms, compute "
                f"{load.compute_s_per_request * 1000:.1f} ms per request, "
                f"{load.msgs_per_s:.1f} msgs/s",
                flush=True,
            )
    one, many = runs[1], runs[args.in_flight]
    n = args.in_flight
    print(
        f"in_flight_1_queue_s={one.queue_s_per_request:.4f} "
        f"in_flight_1_compute_s={one.compute_s_per_request:.4f} "
        f"in_flight_{n}_queue_s={many.queue_s_per_request:.4f} "
        f"in_flight_{n}_compute_s={many.compute_s_per_request:.4f} "
        f"msgs_per_s_{n}={many.msgs_per_s:.1f}"
    )


if __name__ == "__main__":
    main()
