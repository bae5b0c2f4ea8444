"""``python -m bench.online``: the online service under an open-loop load (fixed arrival rate).

A ``modstream online`` process is started on a throw-away database (created and migrated here,
dropped after) with its own verdict topic. Calls are sent at a fixed rate whether or not earlier
ones have answered (open loop: a slow server cannot slow the arrivals down, so queueing shows up
in the latency, measured from each call's scheduled send time). Printed: p50/p95/p99 latency,
achieved rate (answered calls per second of the run), status codes, and the mean coalesced model
batch (model verdict rows per ``batch_id`` in the database).

The local stack serves the fixture model; ``--real-triton-url`` runs the same load against a
Triton serving the real ``model_repository/`` (else its figures are ``n/a``, with the reason).
The last line is ``online_p99_ms_fixture=… online_rps_fixture=… online_p99_ms_real=…
online_rps_real=… coalesced_batch_mean=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import socket
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import grpc
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from grpc_health.v1 import health_pb2
from pydantic import SecretStr

from admin.migrate import migrate
from online.api import moderation_pb2 as pb
from online.settings import OnlineSettings
from review.auth import create_user
from review.schemas import Role
from stack.samples import load_texts

__all__ = ["LoadResult", "main", "percentile", "run_load"]

_CHECK = "/modstream.v1.ModerationService/CheckMessage"


@dataclass(frozen=True, slots=True)
class LoadResult:
    """One open-loop run: latencies of answered calls (ms), status counts, wall time."""

    latencies_ms: list[float]
    statuses: Counter[str]
    seconds: float
    batch_mean: float

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds > 0 else 0.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_ms, 99)


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(pct / 100.0 * len(ordered))))
    return ordered[rank - 1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dsn_with_database(dsn: str, database: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path="/" + database))


@asynccontextmanager
async def _scratch(settings: OnlineSettings) -> AsyncIterator[tuple[str, str, str]]:
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


@asynccontextmanager
async def _service(env: dict[str, str], port: int) -> AsyncIterator[None]:
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
        yield
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


async def _batch_mean(dsn: str) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, count(DISTINCT batch_id) AS b FROM verdicts "
            "WHERE source_topic = 'online' AND decided_by = 'model'"
        )
    finally:
        await conn.close()
    return float(row["n"]) / float(row["b"]) if row is not None and row["b"] else 0.0


async def measure(
    settings: OnlineSettings,
    triton_url: str,
    rate: float,
    seconds: float,
    deadline_s: float,
    texts: Sequence[str],
) -> LoadResult:
    """One run against a fresh service that talks to the Triton at ``triton_url``."""
    async with _scratch(settings) as (dsn, topic, token):
        port = _free_port()
        env = {
            "MODSTREAM_POSTGRES__DSN": dsn,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": topic,
            "MODSTREAM_ONLINE__PORT": str(port),
            "MODSTREAM_ONLINE__HEALTH_INTERVAL_S": "0.5",
            "MODSTREAM_TRITON__GRPC_URL": triton_url,
            "MODSTREAM_LOG_LEVEL": "warning",
        }
        async with _service(env, port):
            # a short warm-up (connections, first model call), not measured
            await run_load(port, token, texts, min(rate, 50.0), 1.0, deadline_s)
            latencies, statuses, wall = await run_load(
                port, token, texts, rate, seconds, deadline_s
            )
        return LoadResult(latencies, statuses, wall, await _batch_mean(dsn))


def _report(label: str, result: LoadResult, rate: float) -> None:
    lat = result.latencies_ms
    print(
        f"{label}: offered={rate:.0f}/s achieved={result.rps:.1f}/s "
        f"p50={percentile(lat, 50):.1f}ms p95={percentile(lat, 95):.1f}ms "
        f"p99={percentile(lat, 99):.1f}ms statuses={dict(result.statuses)} "
        f"coalesced_batch_mean={result.batch_mean:.2f}"
    )


async def main(rate: float, seconds: float, deadline_ms: float, real_url: str | None) -> None:
    settings = OnlineSettings()
    texts = [t for _, _, t in load_texts()]
    print(
        f"open loop: rate={rate:.0f}/s seconds={seconds:.0f} deadline={deadline_ms:.0f}ms "
        f"max_items={settings.online.max_items} max_wait_ms={settings.online.max_wait_ms} "
        f"model_budget_ms={settings.online.model_budget_ms}"
    )
    fixture = await measure(
        settings, settings.triton.grpc_url, rate, seconds, deadline_ms / 1000.0, texts
    )
    _report("fixture", fixture, rate)
    real_p99 = real_rps = "n/a"
    if real_url is None:
        print(
            "real: not measured: the local stack's Triton serves the fixture model; pass "
            "--real-triton-url for a Triton serving model_repository/ (modstream models build)"
        )
    else:
        real = await measure(settings, real_url, rate, seconds, deadline_ms / 1000.0, texts)
        _report("real", real, rate)
        real_p99, real_rps = f"{real.p99_ms:.1f}", f"{real.rps:.1f}"
    print(
        f"online_p99_ms_fixture={fixture.p99_ms:.1f} online_rps_fixture={fixture.rps:.1f} "
        f"online_p99_ms_real={real_p99} online_rps_real={real_rps} "
        f"coalesced_batch_mean={fixture.batch_mean:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=200.0, help="calls per second (default 200)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds (10)")
    parser.add_argument("--deadline-ms", type=float, default=1000.0, help="per-call deadline")
    parser.add_argument("--real-triton-url", default=None, help="a Triton serving the real models")
    args = parser.parse_args()
    asyncio.run(main(args.rate, args.seconds, args.deadline_ms, args.real_triton_url))
