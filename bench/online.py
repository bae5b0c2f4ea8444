"""``python -m bench.online``: the online service under an open-loop load (fixed arrival rate).

For each run a ``modstream online`` process is started on a throw-away database (created and
migrated here, dropped after) with its own verdict topic. Calls are sent at a fixed rate whether
or not earlier ones have answered (open loop: a slow server cannot slow the arrivals down, so
queueing shows up in the latency). The load comes from ``ghz`` (``--client ghz``, the default
when ``scripts/bootstrap.sh`` has built it: ``--async --rps``, latency from each call's send; see
``bench.ghz``) or from this process (``--client python``: one grpc.aio channel, latency from each
call's scheduled send time). Printed per run: p50/p95/p99 latency, achieved rate (answered calls
per second of the run), status codes, how the verdicts were decided, the mean coalesced model
batch (model verdict rows per ``batch_id``), the CPU the service and the client used (cores), the
machine's busy share, and the service's CPU per answered call (``service_cpu_ms_per_call``).

Fixture leg: the local stack's Triton (the fixture model), at each of ``--rates``. Real leg (when
``--model-repository`` holds a built ``model_repository/``, or with ``--real-triton-url``): a
private ``tritonserver`` on it (``bench.models.private_server``, ports 28200-28202); the model's
own batch-32 rate is measured (one request at a time, before and after the load), the service is
loaded at ``--real-fraction`` (80 %) of that rate, and its p99 is compared with twice the
batch-32 time, all in one run. Last line: ``online_p99_ms_fixture=… online_rps_fixture=…``
(the run at the highest fixture rate) ``online_p99_ms_real=… online_rps_real=…
coalesced_batch_mean=…`` (of the real leg; of that fixture run when the real leg is skipped)
``online_cpu_ms_per_call_fixture=…`` (the service's CPU per answered call, same fixture run).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import socket
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import grpc
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from grpc_health.v1 import health_pb2
from pydantic import SecretStr

from admin.migrate import migrate
from bench.ghz import find_ghz, ghz_load
from bench.models import (
    REPOSITORY,
    cycled_batch,
    messages_per_s,
    private_server,
    sample_messages,
    triton_infer,
)
from bench.process_stats import busiest, busy_fraction, cpu_by_process, machine_ticks
from bench.process_stats import sample as process_sample
from online.api import moderation_pb2 as pb
from online.settings import OnlineSettings
from review.auth import create_user
from review.schemas import Role
from stack.samples import load_texts

__all__ = [
    "LoadResult",
    "free_port",
    "main",
    "online_process",
    "percentile",
    "real_target_ms",
    "run_load",
    "scratch",
]

_CHECK = "/modstream.v1.ModerationService/CheckMessage"


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One open-loop run: latencies of answered calls (ms), status counts, wall time."""

    latencies_ms: list[float]
    statuses: Counter[str]
    seconds: float
    batch_mean: float
    decided_by: Counter[str] = field(default_factory=Counter)
    """Verdict rows per ``decided_by`` (``model``, ``rules``, ``pending_model``)."""
    service_cores: float = 0.0
    """CPU seconds the service used per second of the measured run."""
    client_cores: float = 0.0
    machine_busy: float = 0.0
    """Share of all cores' time the machine was busy during the measured run."""
    busiest: list[tuple[str, float]] = field(default_factory=list)
    """The programs that used the most cores during the measured run (``bench.process_stats``)."""

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds > 0 else 0.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_ms, 99)

    @property
    def service_cpu_ms_per_call(self) -> float:
        """The service's CPU time per answered call, in milliseconds."""
        calls = len(self.latencies_ms)
        return self.service_cores * self.seconds / calls * 1000.0 if calls else 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(pct / 100.0 * len(ordered))))
    return ordered[rank - 1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dsn_with_database(dsn: str, database: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path="/" + database))


@asynccontextmanager
async def scratch(settings: OnlineSettings) -> AsyncIterator[tuple[str, str, str]]:
    """A migrated throw-away database, a verdict topic and a platform token; removed after."""
    admin_dsn = settings.postgres.dsn.get_secret_value()
    name = f"bench_online_{uuid.uuid4().hex[:8]}"
    topic = f"bench.online.{uuid.uuid4().hex[:8]}.verdicts"
    conn = await asyncpg.connect(admin_dsn)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    dsn = _dsn_with_database(admin_dsn, name)
    kafka = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await kafka.start()
    try:
        await kafka.create_topics([NewTopic(topic, 4, 1)])
        postgres = settings.postgres.model_copy(update={"dsn": SecretStr(dsn)})
        await migrate(settings.model_copy(update={"postgres": postgres}))
        conn = await asyncpg.connect(dsn)
        try:
            token = await create_user(conn, f"bench-{uuid.uuid4().hex[:6]}", Role.PLATFORM)
        finally:
            await conn.close()
        yield dsn, topic, token
    finally:
        await kafka.delete_topics([topic])
        await kafka.close()
        conn = await asyncpg.connect(admin_dsn)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


def real_target_ms(batch32_ms: float) -> float:
    """The real-model p99 target: twice the model's own batch-32 time."""
    return 2.0 * batch32_ms


@asynccontextmanager
async def online_process(env: dict[str, str], port: int) -> AsyncIterator[int]:
    """``modstream online`` as a child process, until it answers health checks."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modstream.cli",
        "online",
        env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            deadline = time.monotonic() + 60
            while True:
                try:
                    reply = await check(health_pb2.HealthCheckRequest(), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.aio.AioRpcError:
                    pass
                if time.monotonic() > deadline or process.returncode is not None:
                    raise RuntimeError("modstream online did not become SERVING within 60 s")
                await asyncio.sleep(0.2)
        yield process.pid
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


async def run_load(
    port: int, token: str, texts: Sequence[str], rate: float, seconds: float, deadline_s: float
) -> tuple[list[float], Counter[str], float]:
    """Send ``rate`` calls per second for ``seconds``; (latencies of answers, statuses, wall)."""
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    metadata = (("authorization", f"Bearer {token}"),)
    rng = random.Random(2026)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            _CHECK,
            request_serializer=pb.CheckMessageRequest.SerializeToString,
            response_deserializer=pb.CheckMessageResponse.FromString,
        )

        async def one(index: int, due: float) -> None:
            request = pb.CheckMessageRequest(
                message_id=f"bench-{index}-{uuid.uuid4().hex[:8]}",
                group_id=f"group-{rng.randrange(50)}",
                sender_id=f"user-{rng.randrange(5000)}",
                text=rng.choice(texts),
                sent_at=datetime.now(UTC),
            )
            try:
                await call(request, metadata=metadata, timeout=deadline_s)
            except grpc.aio.AioRpcError as exc:
                statuses[exc.code().name] += 1
                return
            statuses["OK"] += 1
            latencies.append((time.monotonic() - due) * 1000.0)

        total = int(rate * seconds)
        started = time.monotonic()
        tasks: list[asyncio.Task[None]] = []
        for index in range(total):
            due = started + index / rate
            pause = due - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            tasks.append(asyncio.create_task(one(index, due)))
        await asyncio.gather(*tasks)
        wall = time.monotonic() - started
    return latencies, statuses, wall


async def _verdict_figures(dsn: str) -> tuple[float, Counter[str]]:
    """The mean model batch (rows per ``batch_id``) and the rows per ``decided_by``."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, count(DISTINCT batch_id) AS b FROM verdicts "
            "WHERE source_topic = 'online' AND decided_by = 'model'"
        )
        kinds = await conn.fetch(
            "SELECT decided_by, count(*) AS n FROM verdicts WHERE source_topic = 'online' "
            "GROUP BY decided_by"
        )
    finally:
        await conn.close()
    mean = float(row["n"]) / float(row["b"]) if row is not None and row["b"] else 0.0
    return mean, Counter({str(k["decided_by"]): int(k["n"]) for k in kinds})


async def measure(
    settings: OnlineSettings,
    triton_url: str,
    rate: float,
    seconds: float,
    deadline_s: float,
    texts: Sequence[str],
    extra_env: dict[str, str] | None = None,
    ghz: Path | None = None,
) -> LoadResult:
    """One run against a fresh service that talks to the Triton at ``triton_url``; the load
    comes from ``ghz`` when given, else from this process."""
    async with scratch(settings) as (dsn, topic, token):
        port = free_port()
        env = {
            "MODSTREAM_POSTGRES__DSN": dsn,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": topic,
            "MODSTREAM_ONLINE__PORT": str(port),
            "MODSTREAM_PERSPECTIVE__PORT": "0",
            "MODSTREAM_ONLINE__HEALTH_INTERVAL_S": "0.5",
            "MODSTREAM_TRITON__GRPC_URL": triton_url,
            "MODSTREAM_LOG_LEVEL": "warning",
            **(extra_env or {}),
        }
        async with online_process(env, port) as pid:
            # a short warm-up (connections, first model call), not measured
            await run_load(port, token, texts, min(rate, 50.0), 1.0, deadline_s)
            service, client = process_sample(pid), process_sample(os.getpid())
            ticks, everyone = machine_ticks(), cpu_by_process()
            started = time.monotonic()
            if ghz is None:
                latencies, statuses, wall = await run_load(
                    port, token, texts, rate, seconds, deadline_s
                )
                client_cpu = process_sample(os.getpid()).cpu_s - client.cpu_s
            else:
                run = await ghz_load(
                    ghz,
                    port=port,
                    token=token,
                    texts=texts,
                    rate=rate,
                    seconds=seconds,
                    deadline_s=deadline_s,
                )
                latencies, statuses, wall, client_cpu = (
                    run.latencies_ms,
                    run.statuses,
                    run.seconds,
                    run.client_cpu_s,
                )
            measured_s = time.monotonic() - started
            names = {pid: "service", os.getpid(): "bench"}
            top = busiest(everyone, cpu_by_process(), measured_s, names)
            service_cpu = process_sample(pid).cpu_s - service.cpu_s
            busy = busy_fraction(ticks, machine_ticks())
        mean, decided_by = await _verdict_figures(dsn)
        return LoadResult(
            latencies,
            statuses,
            wall,
            mean,
            decided_by,
            service_cpu / measured_s,
            client_cpu / measured_s,
            busy,
            top,
        )


def _report(label: str, result: LoadResult, rate: float) -> None:
    lat = result.latencies_ms
    print(
        f"{label}: offered={rate:.0f}/s achieved={result.rps:.1f}/s "
        f"p50={percentile(lat, 50):.1f}ms p95={percentile(lat, 95):.1f}ms "
        f"p99={percentile(lat, 99):.1f}ms statuses={dict(result.statuses)} "
        f"decided_by={dict(result.decided_by)} coalesced_batch_mean={result.batch_mean:.2f} "
        f"service_cores={result.service_cores:.2f} client_cores={result.client_cores:.2f} "
        f"machine_busy={result.machine_busy:.2f} "
        f"service_cpu_ms_per_call={result.service_cpu_ms_per_call:.3f}",
        flush=True,
    )
    cores = " ".join(f"{name}={used:.2f}" for name, used in result.busiest)
    print(f"  cores used: {cores}", flush=True)


def _batch32_ms(url: str, model: str, batches: int) -> float:
    """The model's own time for one request of 32 messages (one request at a time)."""
    messages = sample_messages()
    work = [cycled_batch(messages, 32, 32 * i) for i in range(batches)]
    return 32_000.0 / messages_per_s(triton_infer(url, model), work)


def _real_leg(
    args: argparse.Namespace, settings: OnlineSettings, texts: list[str], ghz: Path | None
) -> LoadResult:
    """Batch-32 time, the online service at ``real_fraction`` of that rate, batch-32 again."""
    with ExitStack() as stack:
        url = args.real_triton_url or private_server(stack, args.model_repository)
        model = settings.triton.model_name
        before = _batch32_ms(url, model, args.batch32_requests)
        print(f"real: model batch-32 time {before:.1f} ms ({32_000.0 / before:.1f} msgs/s)")
        rate = args.real_fraction * 32_000.0 / before
        budget_ms = args.real_model_budget_ms or 4.0 * before
        deadline_s = max(args.deadline_ms, 2.0 * budget_ms) / 1000.0
        env = {"MODSTREAM_ONLINE__MODEL_BUDGET_MS": f"{budget_ms:.0f}"}
        print(f"real: model_budget_ms={budget_ms:.0f} deadline={deadline_s * 1000:.0f}ms")
        result = asyncio.run(
            measure(settings, url, rate, args.seconds, deadline_s, texts, env, ghz=ghz)
        )
        after = _batch32_ms(url, model, args.batch32_requests)
    batch32 = statistics.fmean([before, after])
    _report("real", result, rate)
    target = real_target_ms(batch32)
    print(
        f"real: batch-32 time {before:.1f} ms before, {after:.1f} ms after the load; "
        f"offered {args.real_fraction:.0%} of {32_000.0 / batch32:.1f} msgs/s; "
        f"p99 {result.p99_ms:.1f} ms vs target {target:.1f} ms (2x batch-32): "
        f"ratio {result.p99_ms / target:.2f} ({'met' if result.p99_ms <= target else 'not met'}); "
        f"coalesced batch {result.batch_mean:.2f} "
        f"({'met' if result.batch_mean > 4 else 'not met'}: > 4)"
    )
    return result


def _real_available(args: argparse.Namespace) -> str | None:
    """Why the real leg is skipped, or ``None`` to run it."""
    if args.no_real:
        return "--no-real"
    if (
        args.real_triton_url is None
        and not (args.model_repository / "encoder" / "1" / "model.onnx").is_file()
    ):
        return f"{args.model_repository} is not built (modstream models build)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online", description=__doc__)
    parser.add_argument(
        "--rates", default="100,300,500", help="fixture calls per second, comma-separated"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--deadline-ms", type=float, default=1000.0, help="per-call deadline")
    parser.add_argument("--no-real", action="store_true", help="skip the real-model leg")
    parser.add_argument(
        "--model-repository", type=Path, default=REPOSITORY, help="built real models"
    )
    parser.add_argument("--real-triton-url", default=None, help="a Triton serving the real models")
    parser.add_argument("--real-fraction", type=float, default=0.8, help="of the batch-32 rate")
    parser.add_argument(
        "--real-model-budget-ms",
        type=float,
        default=None,
        help="the service's model budget in the real leg (default 4x the batch-32 time)",
    )
    parser.add_argument("--batch32-requests", type=int, default=12, help="timed batch-32 calls")
    parser.add_argument(
        "--client",
        choices=("ghz", "python"),
        default=None,
        help="the load generator (default: ghz when scripts/bootstrap.sh has built it)",
    )
    args = parser.parse_args(argv)
    ghz = find_ghz()
    client = args.client or ("ghz" if ghz is not None else "python")
    if client == "ghz" and ghz is None:
        parser.error("ghz is not installed: scripts/bootstrap.sh builds it (go install)")
    load_tool = ghz if client == "ghz" else None
    args.model_repository = args.model_repository.resolve()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    settings = OnlineSettings()
    texts = [t for _, _, t in load_texts()]
    print(
        f"open loop: rates={rates} seconds={args.seconds:.0f} deadline={args.deadline_ms:.0f}ms "
        f"max_items={settings.online.max_items} max_wait_ms={settings.online.max_wait_ms} "
        f"model_budget_ms={settings.online.model_budget_ms} cores={os.cpu_count()} "
        f"client={client}",
        flush=True,
    )
    fixture: LoadResult | None = None
    for rate in rates:
        fixture = asyncio.run(
            measure(
                settings,
                settings.triton.grpc_url,
                rate,
                args.seconds,
                args.deadline_ms / 1000.0,
                texts,
                ghz=load_tool,
            )
        )
        _report("fixture", fixture, rate)
    if fixture is None:
        parser.error("no --rates given")
    real_p99 = real_rps = "n/a"
    batch_mean = fixture.batch_mean
    skipped = _real_available(args)
    if skipped is not None:
        print(f"real: not measured: {skipped}")
    else:
        real = _real_leg(args, settings, texts, load_tool)
        real_p99, real_rps = f"{real.p99_ms:.1f}", f"{real.rps:.1f}"
        batch_mean = real.batch_mean
    print(
        f"online_p99_ms_fixture={fixture.p99_ms:.1f} online_rps_fixture={fixture.rps:.1f} "
        f"online_p99_ms_real={real_p99} online_rps_real={real_rps} "
        f"coalesced_batch_mean={batch_mean:.2f} "
        f"online_cpu_ms_per_call_fixture={fixture.service_cpu_ms_per_call:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
