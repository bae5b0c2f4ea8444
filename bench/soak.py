"""``python -m bench.soak --minutes 30``: one worker under steady load; does anything grow?

A ``modstream worker`` (the stack's Triton, the fixture model) consumes a fresh topic while
records are produced at a fixed rate (``--rate``; by default half the capacity measured by a
short end-to-end run first). Every ``--every-s`` seconds it prints the worker's resident memory
and open file descriptors (``/proc/PID``), its open asyncio tasks (the ``modstream_open_tasks``
gauge) and how many records have verdicts. The first sample is taken after ``--warmup-s``.

The last line: ``minutes= rate_msgs_per_s= rss_start_mb= rss_end_mb= rss_slope_mb_per_h=
fds_start= fds_end= tasks_start= tasks_end= produced= verdicts= rss_growth_mb=`` (target:
RSS flat within 20 MB, descriptors and tasks not growing, every produced record with a verdict).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import time
import urllib.request
import uuid

import asyncpg
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from bench.pipeline import bench_worker, chat_records, create_topic, run_e2e
from bench.process_stats import sample
from bench.soak_figures import SoakFigures, slope_per_hour, soak_line
from common.kafka_client import kafka_client_kwargs
from worker.settings import WorkerSettings

__all__ = ["main"]

_MB = 1024 * 1024
_SOAK_HTTP_PORT = 18091
_CHUNK_S = 10.0
_DRAIN_S = 180.0
_BROKER_WAIT_S = 300.0
_TASKS = re.compile(r"^modstream_open_tasks (\S+)$", re.MULTILINE)


async def _count_verdicts(dsn: str, topic: str) -> int:
    """Verdict rows of ``topic``, on a fresh connection (a neighbour's test may restart
    Postgres during a long soak); -1 when Postgres cannot answer now."""
    try:
        conn = await asyncpg.connect(dsn, timeout=10)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return -1
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM verdicts WHERE source_topic = $1", topic)
        )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return -1
    finally:
        await conn.close()


def _open_tasks(port: int) -> int:
    """The worker's ``modstream_open_tasks`` gauge; -1 when it cannot be read now."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            match = _TASKS.search(bytes(response.read()).decode())
    except OSError:
        return -1
    return int(float(match.group(1))) if match else -1


class _Producer:
    """Produces generated chat at ``rate`` until stopped; counts acknowledged records."""

    def __init__(self, settings: WorkerSettings, topic: str, rate: float, prefix: str) -> None:
        self._settings = settings
        self._topic = topic
        self._rate = rate
        self._prefix = prefix
        self.acked = 0
        self.failed = 0

    async def run(self, stop: asyncio.Event) -> None:
        producer = await self._started_producer()
        pending: set[asyncio.Future[object]] = set()
        try:
            started = time.perf_counter()
            sent = 0
            chunk = 0
            while not stop.is_set():
                records = chat_records(int(self._rate * _CHUNK_S), chunk, f"{self._prefix}-{chunk}")
                chunk += 1
                index = 0
                while index < len(records) and not stop.is_set():
                    due = int((time.perf_counter() - started) * self._rate) + 1 - sent
                    for record in records[index : index + max(0, due)]:
                        try:
                            ack = await producer.send(self._topic, record.value, key=record.key)
                        except KafkaError:
                            self.failed += 1
                            continue
                        ack.add_done_callback(self._count)
                        pending.add(ack)
                        ack.add_done_callback(pending.discard)
                    step = min(max(0, due), len(records) - index)
                    index += step
                    sent += step
                    await asyncio.sleep(0.01)
            await asyncio.gather(*pending, return_exceptions=True)
        finally:
            await producer.stop()

    async def _started_producer(self) -> AIOKafkaProducer:
        """A started producer, waiting (bounded) for a broker a neighbour is restarting."""
        deadline = time.monotonic() + _BROKER_WAIT_S
        while True:
            producer = AIOKafkaProducer(
                **kafka_client_kwargs(self._settings.kafka), linger_ms=5, acks="all"
            )
            try:
                await producer.start()
            except KafkaError:
                await producer.stop()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(2.0)
                continue
            return producer

    def _count(self, ack: asyncio.Future[object]) -> None:
        if ack.cancelled() or ack.exception() is not None:
            self.failed += 1
        else:
            self.acked += 1


async def main(args: argparse.Namespace) -> None:
    # A broker restart by a neighbour's test makes aiokafka log every reconnect attempt.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    settings = WorkerSettings()
    run = uuid.uuid4().hex[:8]
    rate = args.rate
    if rate is None:
        probe = await run_e2e(
            settings, chat_records(5000, 7, f"soak-{run}-probe"), f"soak.{run}.probe"
        )
        rate = probe.msgs_per_s / 2
        print(f"capacity {probe.msgs_per_s:.0f} msgs/s (5000 messages); soaking at {rate:.0f}")
    topic = f"soak.{run}.chat"
    await create_topic(settings.kafka, topic)
    dsn = settings.postgres.dsn.get_secret_value()
    rss: list[tuple[float, float]] = []
    fds: list[int] = []
    tasks: list[int] = []
    producer = _Producer(settings, topic, rate, f"soak-{run}")
    stop = asyncio.Event()
    try:
        async with bench_worker(topic, http_port=_SOAK_HTTP_PORT) as worker:
            pid = worker.process.pid
            feeding = asyncio.create_task(producer.run(stop))
            started = time.monotonic()
            deadline = started + args.minutes * 60.0
            next_sample = started + args.warmup_s
            while time.monotonic() < deadline:
                if feeding.done():
                    feeding.result()  # raises what stopped the producer
                if worker.process.returncode is not None:
                    raise SystemExit(f"soak: the worker died; see {worker.log_path}")
                await asyncio.sleep(max(0.0, min(next_sample, deadline) - time.monotonic()))
                if time.monotonic() < next_sample:
                    continue
                try:
                    reading = sample(pid)
                except FileNotFoundError:
                    raise SystemExit(f"soak: the worker died; see {worker.log_path}") from None
                open_tasks = await asyncio.to_thread(_open_tasks, _SOAK_HTTP_PORT)
                done = await _count_verdicts(dsn, topic)
                elapsed = time.monotonic() - started
                rss.append((elapsed, reading.rss_bytes / _MB))
                fds.append(reading.open_fds)
                tasks.append(open_tasks)
                print(
                    f"t={elapsed:6.0f}s rss_mb={reading.rss_bytes / _MB:7.1f} "
                    f"fds={reading.open_fds} tasks={open_tasks} acked={producer.acked} "
                    f"failed={producer.failed} verdicts={done} cpu_s={reading.cpu_s:.0f}",
                    flush=True,
                )
                next_sample += args.every_s
            stop.set()
            await feeding
            verdicts = -1
            drain_deadline = time.monotonic() + _DRAIN_S
            while time.monotonic() < drain_deadline:
                verdicts = await _count_verdicts(dsn, topic)
                if verdicts >= producer.acked:
                    break
                await asyncio.sleep(1.0)
    finally:
        stop.set()
    if not rss:
        raise SystemExit("soak: no sample taken (is --minutes longer than --warmup-s?)")
    print(
        soak_line(
            SoakFigures(
                minutes=args.minutes,
                rate_msgs_per_s=rate,
                rss_start_mb=rss[0][1],
                rss_end_mb=rss[-1][1],
                rss_slope_mb_per_h=slope_per_hour(rss),
                fds_start=fds[0],
                fds_end=fds[-1],
                tasks_start=tasks[0],
                tasks_end=tasks[-1],
                produced=producer.acked,
                verdicts=int(verdicts),
            )
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=None, help="msgs/s (default: half capacity)")
    parser.add_argument("--every-s", type=float, default=30.0)
    parser.add_argument("--warmup-s", type=float, default=60.0)
    asyncio.run(main(parser.parse_args()))
