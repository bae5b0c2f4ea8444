"""``python -m bench.pipeline``: modstream end to end against its ceiling, with the fixture model
and with the real models, plus produce-to-verdict latency at a fixed offered rate.

Measured in one run on the local stack, over the same generated chat traffic:

(a) e2e       — records already in Kafka; a ``modstream worker`` process consumes them until every
                one has a verdict row (rate over the time from the worker's readiness to the last
                row). The worker's own CPU time per message is reported too (``/proc``), a figure
                the neighbours on a shared machine disturb far less than wall time.
(b) ceiling   — the same Triton model driven directly at batch ``max_items`` with
                ``max_in_flight`` calls in flight: what inference alone allows.
(l) latency   — a fresh worker, records produced at a fixed rate (``--load`` of (a), 20 %):
                p50 and p99 of the worker's ``modstream_produce_to_verdict_seconds`` histogram.
(c) naive     — optional (``--naive-messages``): per message decode, rules, one infer call,
                one INSERT in its own transaction.

(i) in-process — (a) again with ``inference.backend = inprocess``: the same model code inside the
                worker (ONNX Runtime on a thread pool for the real models), no Triton.

(a), (b), (l) and (i) run against the stack's model repository (the small fixture model, (a)
and (b) on the stack's Triton); (a), (b) and (i) run again on the real models
(``--real-repository``; (a) and (b) on a private ``tritonserver`` started and stopped here), so
the two backends are side by side in one run. When that is impossible the reason is printed
and those fields are ``nan``.

The last line is ``e2e_msgs_per_s= ceiling_msgs_per_s= ratio_ceiling= fixture_e2e_msgs_per_s=
fixture_ceiling_msgs_per_s= fixture_ratio_ceiling= p99_ms_fixture= cpu_model_speedup=
inprocess_e2e_msgs_per_s= ratio_inprocess_triton= fixture_inprocess_e2e_msgs_per_s=`` (see
``bench.pipeline_figures``; the first three are the real models', ``cpu_model_speedup`` is read
from ``bench.cpu_model`` when that module exists). Compare ratios, not rates, across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import os
import random
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError

from bench.pipeline_figures import (
    NAN,
    PipelineFigures,
    histogram_buckets,
    histogram_mean,
    histogram_quantile,
    ratio,
    summary_line,
)
from bench.process_stats import sample
from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings, project_root
from engine.stores.database import Database
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.triton import TritonModerationClient
from pipelines.decode import decode_message
from pipelines.messages import SourcePosition
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict
from stack import private_triton
from stack.samples import SampleRecord, load_texts, produce
from stack.settings import StackSettings, StackToolSettings
from worker.settings import WorkerSettings

_PARTITIONS = 4
_BENCH_HTTP_PORT = 18089
_LATENCY_METRIC = "modstream_produce_to_verdict_seconds"
_POLL_S = 0.05
_BROKER_WAIT_S = 300.0
_START_ATTEMPTS = 12


def chat_records(count: int, seed: int, prefix: str) -> list[SampleRecord]:
    """Chat of realistic length: one to three sample lines joined, 20 to 250 characters."""
    rng = random.Random(seed)
    texts = [t for _, _, t in load_texts()]
    base = datetime.now(UTC).replace(microsecond=0)
    out: list[SampleRecord] = []
    for i in range(count):
        text = " ".join(rng.choice(texts) for _ in range(rng.choice((1, 1, 2, 3))))
        group = f"group-{rng.randrange(50)}"
        doc = {
            "message_id": f"{prefix}-{i:07d}",
            "group_id": group,
            "sender_id": f"user-{rng.randrange(5000)}",
            "text": text,
            "sent_at": (base + timedelta(milliseconds=i)).isoformat(),
        }
        out.append(SampleRecord(group.encode(), orjson.dumps(doc), doc["message_id"], "chat"))
    return out


async def create_topic(kafka: KafkaSettings, topic: str) -> None:
    """Create ``topic`` with four partitions, waiting up to ``_BROKER_WAIT_S`` for a broker
    that is restarting (on a shared machine other test suites stop and start it)."""
    deadline = time.monotonic() + _BROKER_WAIT_S
    while True:
        admin = AIOKafkaAdminClient(**kafka_client_kwargs(kafka))
        try:
            await admin.start()
        except KafkaConnectionError:
            await admin.close()
            if time.monotonic() > deadline:
                raise
            print("bench: Kafka unreachable, waiting", file=sys.stderr)
            await asyncio.sleep(2.0)
            continue
        try:
            await admin.create_topics([NewTopic(topic, _PARTITIONS, 1)])
        finally:
            await admin.close()
        return


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (local URL)
            return bool(response.status == 200)
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class E2E:
    """An end-to-end run: throughput, the worker's CPU per message, and where its batches
    spent their time (means from the worker's own histograms)."""

    msgs_per_s: float
    cpu_us_per_msg: float
    batch_items: float = NAN
    inference_ms: float = NAN
    sink_ms: float = NAN

    def describe(self) -> str:
        return (
            f"{self.msgs_per_s:9.1f} msgs/s, worker CPU {self.cpu_us_per_msg:.0f} us/msg; "
            f"per batch: {self.batch_items:.0f} items, inference {self.inference_ms:.1f} ms, "
            f"Postgres {self.sink_ms:.1f} ms"
        )


@dataclass(slots=True)
class _RunningWorker:
    process: asyncio.subprocess.Process
    http_port: int
    log_path: Path


async def _start_worker(
    environment: dict[str, str], http_port: int, log_path: Path
) -> asyncio.subprocess.Process:
    """Start a worker and wait for ``/readyz``. A worker that exits during start-up is started
    again (``_START_ATTEMPTS`` in all): on a shared machine a neighbour's test may be
    restarting the broker, and the worker refuses to start without one."""
    url = f"http://127.0.0.1:{http_port}/readyz"
    for attempt in range(1, _START_ATTEMPTS + 1):
        with log_path.open("wb" if attempt == 1 else "ab") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "modstream.cli",
                "worker",
                env=environment,
                stdout=log,
                stderr=log,
            )
        while not await asyncio.to_thread(_ready, url):
            if process.returncode is not None:
                break
            await asyncio.sleep(0.1)
        else:
            return process
        print(f"bench: the worker exited during start-up (attempt {attempt})", file=sys.stderr)
        await asyncio.sleep(5.0)
    raise SystemExit(f"bench: the worker did not start; see {log_path}")


@contextlib.asynccontextmanager
async def bench_worker(
    topic: str, *, http_port: int = _BENCH_HTTP_PORT, env: dict[str, str] | None = None
) -> AsyncIterator[_RunningWorker]:
    """A ``modstream worker`` subprocess on ``topic``, ready (``/readyz``) when yielded, then
    terminated. ``env`` adds settings (``MODSTREAM_...``) for this worker only."""
    environment = dict(os.environ)
    environment.update(
        {
            "MODSTREAM_KAFKA__INPUT_TOPIC": topic,
            "MODSTREAM_KAFKA__GROUP_ID": f"bench-{topic}",
            "MODSTREAM_KAFKA__VERDICT_TOPIC": f"{topic}.verdicts",
            "MODSTREAM_HTTP__PORT": str(http_port),
        }
    )
    environment.update(env or {})
    log_path = StackSettings().state_dir / f"bench-worker-{http_port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process = await _start_worker(environment, http_port, log_path)
    try:
        yield _RunningWorker(process, http_port, log_path)
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def wait_for_verdicts(
    conn: asyncpg.Connection, topic: str, count: int, workers: Sequence[_RunningWorker]
) -> None:
    """Return once ``topic`` has ``count`` verdict rows; exit if a worker died first."""
    while True:
        done = await conn.fetchval("SELECT count(*) FROM verdicts WHERE source_topic = $1", topic)
        if done >= count:
            return
        for worker in workers:
            if worker.process.returncode is not None:
                raise SystemExit(f"bench: a worker died mid-run; see {worker.log_path}")
        await asyncio.sleep(_POLL_S)


async def run_e2e(
    settings: WorkerSettings,
    records: list[SampleRecord],
    topic: str,
    *,
    env: dict[str, str] | None = None,
) -> E2E:
    await create_topic(settings.kafka, topic)
    await produce(settings.kafka, topic, records)
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        async with bench_worker(topic, env=env) as worker:
            pid = worker.process.pid
            cpu_before = sample(pid).cpu_s
            started = time.perf_counter()
            await wait_for_verdicts(conn, topic, len(records), [worker])
            elapsed = time.perf_counter() - started
            cpu = sample(pid).cpu_s - cpu_before
            url = f"http://127.0.0.1:{worker.http_port}/metrics"
            exposition = await asyncio.to_thread(_get, url)
    finally:
        await conn.close()
    return E2E(
        len(records) / elapsed,
        cpu / len(records) * 1e6,
        batch_items=histogram_mean(exposition, "modstream_batch_size_items"),
        inference_ms=histogram_mean(exposition, "modstream_inference_seconds") * 1000.0,
        sink_ms=histogram_mean(exposition, "modstream_sink_seconds") * 1000.0,
    )


async def produce_at_rate(
    kafka: KafkaSettings, topic: str, records: Sequence[SampleRecord], rate: float
) -> None:
    """Send ``records`` at ``rate`` per second (in 10 ms steps), each stamped when sent."""
    producer = AIOKafkaProducer(**kafka_client_kwargs(kafka), linger_ms=1, acks="all")
    await producer.start()
    try:
        pending = []
        started = time.perf_counter()
        sent = 0
        while sent < len(records):
            due = min(len(records), int((time.perf_counter() - started) * rate) + 1)
            for record in records[sent:due]:
                pending.append(await producer.send(topic, record.value, key=record.key))
            sent = due
            await asyncio.sleep(0.01)
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


@dataclass(frozen=True, slots=True)
class Latency:
    """Produce-to-verdict quantiles (ms), and the worker's own share: fetch to durable."""

    p50_ms: float
    p99_ms: float
    fetch_to_durable_p50_ms: float
    fetch_to_durable_p99_ms: float


async def run_latency(
    settings: WorkerSettings, records: list[SampleRecord], topic: str, rate: float
) -> Latency:
    """Produce-to-verdict quantiles with ``records`` offered at ``rate`` msgs/s."""
    await create_topic(settings.kafka, topic)
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        async with bench_worker(topic) as worker:
            await produce_at_rate(settings.kafka, topic, records, rate)
            await wait_for_verdicts(conn, topic, len(records), [worker])
            url = f"http://127.0.0.1:{worker.http_port}/metrics"
            exposition = await asyncio.to_thread(_get, url)
    finally:
        await conn.close()
    buckets = histogram_buckets(exposition, _LATENCY_METRIC)
    in_worker = histogram_buckets(exposition, "modstream_end_to_end_seconds")
    return Latency(
        histogram_quantile(0.5, buckets) * 1000.0,
        histogram_quantile(0.99, buckets) * 1000.0,
        histogram_quantile(0.5, in_worker) * 1000.0,
        histogram_quantile(0.99, in_worker) * 1000.0,
    )


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (local URL)
        return bytes(response.read()).decode()


async def run_ceiling(settings: WorkerSettings, texts: Sequence[str]) -> float:
    size = settings.batch.max_items
    batches = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
    gate = asyncio.Semaphore(settings.batch.max_in_flight)
    async with TritonModerationClient(settings.triton) as client:
        await client.infer(batches[0])  # warm-up, not timed

        async def one(batch: list[str]) -> None:
            async with gate:
                await client.infer(batch)

        started = time.perf_counter()
        await asyncio.gather(*(one(b) for b in batches))
        elapsed = time.perf_counter() - started
    return len(texts) / elapsed


async def run_naive(settings: WorkerSettings, records: list[SampleRecord], topic: str) -> float:
    engine = RuleEngine(default_ruleset())
    thresholds = settings.policy
    run = ModelRun(model_name=settings.triton.model_name)
    async with (
        TritonModerationClient(settings.triton) as client,
        Database(settings.postgres) as database,
    ):
        store = VerdictBatchStore(database, f"bench-naive-{topic}")
        started = time.perf_counter()
        for offset, record in enumerate(records):
            message = decode_message(record.value, max_bytes=settings.kafka.max_message_bytes)
            outcome = engine.evaluate(message)
            scores = None if outcome.is_decisive else (await client.infer([message.text])).scores[0]
            verdict = make_verdict(
                MessageFacts.of(SourcePosition(topic, 0, offset), message),
                outcome,
                scores,
                thresholds,
                run,
                queue_ms=0.0,
            )
            await store.write(VerdictBatch([verdict], offsets={(topic, 0): offset + 1}))
        elapsed = time.perf_counter() - started
    return len(records) / elapsed


@contextlib.contextmanager
def real_triton(repository: Path) -> Iterator[str]:
    """A private ``tritonserver`` over the real models on free ports; yields its gRPC address.
    Raises ``RuntimeError`` (with the reason) when it cannot run here."""
    encoder = repository / "encoder" / "1" / "model.onnx"
    if not encoder.is_file():
        raise RuntimeError(f"{encoder} is missing (run `modstream models build`)")
    ports = free_ports(3)
    state = StackSettings().state_dir / "bench-real-triton"
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(
                private_triton(repository, state, (ports[0], ports[1], ports[2]))
            )
        except Exception as exc:  # any failure to start is reported, not raised
            raise RuntimeError(f"tritonserver did not start: {type(exc).__name__}: {exc}") from exc
        yield server.endpoint


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago."""
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _inprocess(repository: Path) -> dict[str, str]:
    """A worker's settings for the in-process backend over ``repository``."""
    return {
        "MODSTREAM_INFERENCE__BACKEND": "inprocess",
        "MODSTREAM_INFERENCE__REPOSITORY": str(repository.absolute()),
    }


def cpu_model_speedup() -> float:
    """``bench.cpu_model``'s measured speedup when that module exists here, else ``nan``."""
    if importlib.util.find_spec("bench.cpu_model") is None:
        return NAN
    module = importlib.import_module("bench.cpu_model")
    value = getattr(module, "cpu_model_speedup", None)
    if callable(value):
        value = value()
    return float(value) if isinstance(value, int | float) else NAN


async def main(args: argparse.Namespace) -> None:
    settings = WorkerSettings()
    run = uuid.uuid4().hex[:8]
    records = chat_records(args.messages, args.seed, f"bench-{run}")
    texts = [orjson.loads(r.value)["text"] for r in records]
    mean_chars = sum(len(t) for t in texts) / len(texts)
    print(
        f"messages={args.messages} mean_chars={mean_chars:.0f} "
        f"max_items={settings.batch.max_items} max_in_flight={settings.batch.max_in_flight} "
        f"target_latency_ms={settings.batch.target_latency_ms} model={settings.triton.model_name}"
    )
    print("-- fixture model (the stack's Triton)")
    e2e = await run_e2e(settings, records, f"bench.{run}.chat")
    print(f"(a) e2e:     {e2e.describe()} ({args.messages} messages)")
    ceiling = await run_ceiling(settings, texts)
    print(f"(b) ceiling: {ceiling:9.1f} msgs/s (Triton alone, batch {settings.batch.max_items})")
    rate = args.load * e2e.msgs_per_s
    count = max(1, int(rate * args.latency_s))
    latency_records = chat_records(count, args.seed + 1, f"bench-{run}-lat")
    latency = await run_latency(settings, latency_records, f"bench.{run}.latency", rate)
    print(
        f"(l) latency: produce->verdict p50 {latency.p50_ms:.1f} ms, p99 {latency.p99_ms:.1f} ms "
        f"at {rate:.0f} msgs/s ({args.load:.0%} of (a)), {count} messages; in the worker "
        f"(fetch->durable, coarse buckets) p50 {latency.fetch_to_durable_p50_ms:.0f} ms, "
        f"p99 {latency.fetch_to_durable_p99_ms:.0f} ms"
    )
    fixture_inprocess = await run_e2e(
        settings,
        records,
        f"bench.{run}.inprocess",
        env=_inprocess(StackToolSettings().stack.model_repository),
    )
    print(f"(i) in-process: {fixture_inprocess.describe()} ({args.messages} messages, no Triton)")
    if args.naive_messages > 0:
        naive = await run_naive(settings, records[: args.naive_messages], f"bench.{run}.naive")
        print(
            f"(c) naive:   {naive:9.1f} msgs/s over {args.naive_messages} messages, "
            f"ratio_naive={ratio(e2e.msgs_per_s, naive):.2f}"
        )
    real_e2e = real_ceiling = NAN
    print(f"-- real models ({args.real_repository})")
    try:
        with real_triton(args.real_repository) as endpoint:
            real_settings = settings.model_copy(
                update={
                    "triton": settings.triton.model_copy(
                        update={"grpc_url": endpoint, "grpc_urls": ()}
                    )
                }
            )
            env = {"MODSTREAM_TRITON__GRPC_URLS": orjson.dumps([endpoint]).decode()}
            real = records[: args.real_messages]
            real_run = await run_e2e(real_settings, real, f"bench.{run}.real", env=env)
            real_e2e = real_run.msgs_per_s
            print(f"(a) e2e:     {real_run.describe()} ({len(real)} messages)")
            real_ceiling = await run_ceiling(real_settings, texts[: args.real_messages])
            print(f"(b) ceiling: {real_ceiling:9.1f} msgs/s")
    except RuntimeError as exc:
        print(f"real models not measured: {exc}")
    real_inprocess = NAN
    if (args.real_repository / "encoder" / "1" / "model.onnx").is_file():
        real = records[: args.real_messages]
        inprocess_run = await run_e2e(
            settings, real, f"bench.{run}.real-inprocess", env=_inprocess(args.real_repository)
        )
        real_inprocess = inprocess_run.msgs_per_s
        print(f"(i) in-process: {inprocess_run.describe()} ({len(real)} messages, no Triton)")
        print(f"    in-process / Triton e2e: {ratio(real_inprocess, real_e2e):.3f}")
    figures = PipelineFigures(
        e2e_msgs_per_s=real_e2e,
        ceiling_msgs_per_s=real_ceiling,
        ratio_ceiling=ratio(real_e2e, real_ceiling),
        fixture_e2e_msgs_per_s=e2e.msgs_per_s,
        fixture_ceiling_msgs_per_s=ceiling,
        fixture_ratio_ceiling=ratio(e2e.msgs_per_s, ceiling),
        p99_ms_fixture=latency.p99_ms,
        cpu_model_speedup=cpu_model_speedup(),
        inprocess_e2e_msgs_per_s=real_inprocess,
        ratio_inprocess_triton=ratio(real_inprocess, real_e2e),
        fixture_inprocess_e2e_msgs_per_s=fixture_inprocess.msgs_per_s,
    )
    print(summary_line(figures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--naive-messages", type=int, default=0)
    parser.add_argument("--real-messages", type=int, default=2_000)
    parser.add_argument("--real-repository", type=Path, default=project_root() / "model_repository")
    parser.add_argument("--load", type=float, default=0.2, help="latency run: share of (a)")
    parser.add_argument("--latency-s", type=float, default=20.0, help="latency run: seconds")
    parser.add_argument("--seed", type=int, default=2026)
    asyncio.run(main(parser.parse_args()))
