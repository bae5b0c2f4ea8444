"""What every chaos scenario needs: a database, topics, worker processes, traffic and a ledger."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from admin.migrate import apply_migrations, discover
from common.settings import project_root
from pipelines.decode import DecodeError, decode_message
from stack.kafka_tools import end_offsets
from stack.samples import load_texts
from stack.service import LocalService
from worker.settings import WorkerSettings

__all__ = [
    "ChaosEnv",
    "Ledger",
    "LedgerResult",
    "Outcome",
    "RssMonitor",
    "ScenarioResult",
    "Topics",
    "Traffic",
    "WorkerProc",
    "good_record",
]

PARTITIONS = 4
Coord = tuple[int, int]
"""(partition, offset) of a produced record in the scenario's input topic."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a produced record must become: a verdict (``message_id``) or a dead letter."""

    message_id: str | None
    reason_code: str | None = None
    """For a record that must be dead-lettered: the reason the decoder gives it."""


@dataclass(frozen=True, slots=True)
class Topics:
    input_topic: str
    dlq_topic: str
    verdict_topic: str
    decision_topic: str
    group_id: str


@dataclass(slots=True)
class LedgerResult:
    produced: int
    verdicts: int
    dead_letters: int
    lost: int
    duplicates: int
    misrouted: int
    """Good records dead-lettered, bad ones verdicted, wrong ids or wrong reasons."""
    extra: int
    """Outcomes for coordinates nobody produced."""
    pending_model: int
    """Verdicts still ``pending_model``, not counting those the model refused to score."""
    unpublished: int
    """Verdict rows never seen on the verdict topic."""

    @property
    def exact(self) -> bool:
        return not (
            self.lost
            or self.duplicates
            or self.misrouted
            or self.extra
            or self.pending_model
            or self.unpublished
        )


@dataclass(slots=True)
class ScenarioResult:
    number: int
    name: str
    passed: bool = False
    messages: int = 0
    kills: int = 0
    lost: int = 0
    duplicates: int = 0
    recovery_s: float | None = None
    peak_rss_mb: float = 0.0
    seconds: float = 0.0
    figures: dict[str, object] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def check(self, condition: bool, failure: str) -> None:
        if not condition:
            self.failures.append(failure)

    def apply_ledger(self, ledger: LedgerResult) -> None:
        self.messages = ledger.produced
        self.lost, self.duplicates = ledger.lost, ledger.duplicates
        self.figures.update(
            verdicts=ledger.verdicts,
            dead_letters=ledger.dead_letters,
            misrouted=ledger.misrouted,
            extra=ledger.extra,
            pending_model_left=ledger.pending_model,
            unpublished=ledger.unpublished,
        )
        self.check(ledger.exact, f"ledger not exact: {ledger}")


class Ledger:
    """Produced coordinates and what each must become."""

    def __init__(self) -> None:
        self.expected: dict[Coord, Outcome] = {}

    def __len__(self) -> int:
        return len(self.expected)

    def add(self, partition: int, offset: int, outcome: Outcome) -> None:
        if (partition, offset) in self.expected:
            raise RuntimeError(f"coordinates {(partition, offset)} produced twice")
        self.expected[(partition, offset)] = outcome

    async def check(self, env: ChaosEnv, topics: Topics) -> LedgerResult:
        conn = await asyncpg.connect(env.dsn)
        try:
            verdict_rows = await conn.fetch(
                "SELECT v.source_partition, v.source_offset, v.message_id, v.decided_by, "
                "  r.source_offset IS NOT NULL AS refused FROM verdicts v "
                "LEFT JOIN rescore_rejections r ON r.source_topic = v.source_topic "
                "  AND r.source_partition = v.source_partition "
                "  AND r.source_offset = v.source_offset "
                "WHERE v.source_topic = $1",
                topics.input_topic,
            )
            dead_rows = await conn.fetch(
                "SELECT source_partition, source_offset, reason_code FROM dead_letters "
                "WHERE source_topic = $1",
                topics.input_topic,
            )
        finally:
            await conn.close()
        published = await env.published_coords(topics)
        seen: Counter[Coord] = Counter()
        misrouted = extra = pending = 0
        ids: Counter[str] = Counter()
        for r in verdict_rows:
            coord = (int(r["source_partition"]), int(r["source_offset"]))
            seen[coord] += 1
            ids[r["message_id"]] += 1
            # A verdict whose text the model refused stays rules-only on purpose.
            pending += r["decided_by"] == "pending_model" and not r["refused"]
            want = self.expected.get(coord)
            if want is None:
                extra += 1
            elif want.message_id != r["message_id"]:
                misrouted += 1
        for r in dead_rows:
            coord = (int(r["source_partition"]), int(r["source_offset"]))
            seen[coord] += 1
            want = self.expected.get(coord)
            if want is None:
                extra += 1
            elif want.message_id is not None or want.reason_code != r["reason_code"]:
                misrouted += 1
        lost = sum(1 for coord in self.expected if coord not in seen)
        duplicates = sum(n - 1 for n in seen.values() if n > 1)
        duplicates += sum(n - 1 for n in ids.values() if n > 1)
        verdict_coords = {
            (int(r["source_partition"]), int(r["source_offset"])) for r in verdict_rows
        }
        return LedgerResult(
            produced=len(self.expected),
            verdicts=len(verdict_rows),
            dead_letters=len(dead_rows),
            lost=lost,
            duplicates=duplicates,
            misrouted=misrouted,
            extra=extra,
            pending_model=pending,
            unpublished=len(verdict_coords - published),
        )


_TEXTS: list[str] = []


def good_record(
    prefix: str, i: int, rng: random.Random, text: str | None = None
) -> tuple[bytes, bytes, Outcome]:
    """One valid chat message with the unique id ``{prefix}-{i:07d}``."""
    if not _TEXTS:
        _TEXTS.extend(t for _kind, _lang, t in load_texts())
    group = f"group-{rng.randrange(20)}"
    message_id = f"{prefix}-{i:07d}"
    document = {
        "message_id": message_id,
        "group_id": group,
        "sender_id": f"user-{rng.randrange(200)}",
        "text": text if text is not None else rng.choice(_TEXTS),
        "sent_at": (datetime.now(UTC) + timedelta(milliseconds=i)).isoformat(),
        "metadata": {"platform": "chaos"},
    }
    return group.encode(), orjson.dumps(document), Outcome(message_id)


def expected_outcome(value: bytes, max_bytes: int) -> Outcome:
    """A bad record's expected reason: the decoder's own classification of those bytes."""
    try:
        message = decode_message(value, max_bytes=max_bytes)
    except DecodeError as exc:
        return Outcome(None, exc.code.value)
    return Outcome(message.message_id)


class ChaosEnv:
    """WorkerSettings from the environment, a throw-away migrated database, a folder for logs."""

    def __init__(self, run_dir: Path) -> None:
        self.settings = WorkerSettings()
        self.run_dir = run_dir
        self.admin_dsn = self.settings.postgres.dsn.get_secret_value()
        self.database = f"chaos_{uuid.uuid4().hex[:10]}"
        base, _, _ = self.admin_dsn.rpartition("/")
        self.dsn = f"{base}/{self.database}"
        self.rss = RssMonitor()
        self.triton: LocalService | None = None
        """A private Triton for the run (``--model-repository``): workers use it and scenario 2
        stops and starts it instead of the stack's."""
        self.triton_url: str | None = None

    async def create(self) -> None:
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            await admin.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            await admin.close()
        conn = await asyncpg.connect(self.dsn)
        try:
            await apply_migrations(conn, discover(project_root() / "migrations"))
        finally:
            await conn.close()
        self.rss.start()

    async def drop(self) -> None:
        self.rss.stop()
        with contextlib.suppress(Exception):
            admin = await asyncpg.connect(self.admin_dsn)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            finally:
                await admin.close()

    @property
    def bootstrap(self) -> str:
        return self.settings.kafka.bootstrap_servers

    async def new_topics(self, scenario: str, *, max_message_bytes: int | None = None) -> Topics:
        suffix = uuid.uuid4().hex[:8]
        topics = Topics(
            input_topic=f"chaos.{suffix}.{scenario}.chat.messages",
            dlq_topic=f"chaos.{suffix}.{scenario}.chat.messages.dlq",
            verdict_topic=f"chaos.{suffix}.{scenario}.moderation.verdicts",
            decision_topic=f"chaos.{suffix}.{scenario}.moderation.decisions",
            group_id=f"chaos-{suffix}-{scenario}",
        )
        configs = {"max.message.bytes": str(max_message_bytes)} if max_message_bytes else {}
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [
                    NewTopic(topics.input_topic, PARTITIONS, 1, topic_configs=configs),
                    NewTopic(topics.dlq_topic, 1, 1, topic_configs=configs),
                    NewTopic(topics.verdict_topic, PARTITIONS, 1),
                    NewTopic(topics.decision_topic, 1, 1),
                ]
            )
        finally:
            await admin.close()
        return topics

    async def produce(
        self,
        topics: Topics,
        ledger: Ledger,
        records: list[tuple[bytes, bytes, Outcome]],
        *,
        max_request_bytes: int = 1_048_576,
    ) -> None:
        """Send ``records`` and write each one's coordinates into the ledger once acknowledged."""
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=10,
            max_request_size=max_request_bytes,
        )
        await producer.start()
        try:
            futures = [
                (await producer.send(topics.input_topic, value, key=key), outcome)
                for key, value, outcome in records
            ]
            for fut, outcome in futures:
                meta = await fut
                ledger.add(meta.partition, meta.offset, outcome)
        finally:
            await producer.stop()

    async def counts(self, topics: Topics) -> tuple[int, int, int, int] | None:
        """(verdicts, dead letters, pending_model, unpublished), or None while Postgres is down."""
        try:
            conn = await asyncpg.connect(self.dsn, timeout=3)
        except Exception:  # Postgres is being stopped or restarted by the scenario
            return None
        try:
            row = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM verdicts WHERE source_topic = $1) AS v, "
                "(SELECT count(*) FROM dead_letters WHERE source_topic = $1) AS d, "
                "(SELECT count(*) FROM verdicts v WHERE source_topic = $1 "
                "   AND decided_by = 'pending_model' AND NOT EXISTS (SELECT 1 FROM "
                "   rescore_rejections r WHERE r.source_topic = v.source_topic AND "
                "   r.source_partition = v.source_partition AND "
                "   r.source_offset = v.source_offset)) AS p, "
                "(SELECT count(*) FROM verdicts WHERE source_topic = $1 AND NOT published) AS u",
                topics.input_topic,
                timeout=10,
            )
        except Exception:
            return None
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
        assert row is not None
        return int(row["v"]), int(row["d"]), int(row["p"]), int(row["u"])

    async def handled(self, topics: Topics) -> int | None:
        counts = await self.counts(topics)
        return None if counts is None else counts[0] + counts[1]

    async def wait_settled(
        self, topics: Topics, ledger: Ledger, timeout_s: float, workers: list[WorkerProc]
    ) -> float | None:
        """Wait until every record has an outcome, nothing is pending_model and every verdict
        row is marked published; returns the seconds it took (None on timeout)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            for w in workers:
                if not w.alive():
                    raise RuntimeError(f"worker {w.name} died (rc {w.returncode()})")
            counts = await self.counts(topics)
            if counts is not None:
                v, d, p, u = counts
                if v + d >= len(ledger) and p == 0 and u == 0:
                    return time.monotonic() - started
            await asyncio.sleep(0.5)
        print(
            f"  not settled after {timeout_s:.0f}s: produced={len(ledger)} "
            f"(verdicts, dead letters, pending_model, unpublished)={counts}",
            file=sys.stderr,
            flush=True,
        )
        return None

    async def wait_handled(
        self, topics: Topics, at_least: int, timeout_s: float, interval_s: float = 0.05
    ) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            n = await self.handled(topics)
            if n is not None and n >= at_least:
                return True
            await asyncio.sleep(interval_s)
        return False

    async def published_coords(self, topics: Topics) -> set[Coord]:
        """Source coordinates of every record on the verdict topic (read to its end)."""
        ends = await end_offsets(self.bootstrap, topics.verdict_topic)
        consumer = AIOKafkaConsumer(
            topics.verdict_topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        coords: set[Coord] = set()
        positions: dict[int, int] = {}
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(
                positions.get(p, 0) < end for p, end in ends.items()
            ):
                batch = await consumer.getmany(timeout_ms=500, max_records=5000)
                for tp, records in batch.items():
                    for record in records:
                        doc = orjson.loads(record.value)
                        coords.add((int(doc["source_partition"]), int(doc["source_offset"])))
                        positions[tp.partition] = record.offset + 1
        finally:
            await consumer.stop()
        return coords

    async def stored_offsets(self, topics: Topics) -> dict[int, int]:
        conn = await asyncpg.connect(self.dsn)
        try:
            rows = await conn.fetch(
                "SELECT partition, next_offset FROM consumer_offsets "
                "WHERE consumer_group = $1 AND topic = $2",
                topics.group_id,
                topics.input_topic,
            )
        finally:
            await conn.close()
        return {int(r["partition"]): int(r["next_offset"]) for r in rows}

    def worker(
        self,
        topics: Topics,
        name: str,
        *,
        instance_id: str | None = None,
        extra_env: dict[str, str] | None = None,
        module: str = "modstream.cli",
    ) -> WorkerProc:
        env = dict(os.environ)
        env.update(
            {
                "MODSTREAM_KAFKA__INPUT_TOPIC": topics.input_topic,
                "MODSTREAM_KAFKA__DLQ_TOPIC": topics.dlq_topic,
                "MODSTREAM_KAFKA__VERDICT_TOPIC": topics.verdict_topic,
                "MODSTREAM_KAFKA__DECISION_TOPIC": topics.decision_topic,
                "MODSTREAM_KAFKA__GROUP_ID": topics.group_id,
                "MODSTREAM_KAFKA__SESSION_TIMEOUT_MS": "6000",
                "MODSTREAM_KAFKA__REBALANCE_TIMEOUT_MS": "30000",
                "MODSTREAM_POSTGRES__DSN": self.dsn,
                "MODSTREAM_POSTGRES__COMMAND_TIMEOUT_S": "10",
                "MODSTREAM_BATCH__MAX_WAIT_S": "0.2",
                "MODSTREAM_BATCH__MAX_RECORDS_IN_FLIGHT": "2000",
                "MODSTREAM_TRITON__BREAKER_RESET_S": "3",
                "MODSTREAM_TRITON__REQUEST_TIMEOUT_S": "5",
                "MODSTREAM_RELIABILITY__OUTBOX_INTERVAL_S": "2",
                "MODSTREAM_RELIABILITY__OUTBOX_MIN_AGE_S": "2",
                "MODSTREAM_RELIABILITY__RESCORE_INTERVAL_S": "2",
                "MODSTREAM_HTTP__PORT": "0",
            }
        )
        env.pop("MODSTREAM_FAILPOINT", None)
        if self.triton_url is not None:
            env["MODSTREAM_TRITON__GRPC_URL"] = self.triton_url
        if instance_id is not None:
            env["MODSTREAM_KAFKA__GROUP_INSTANCE_ID"] = instance_id
        env.update(extra_env or {})
        log = self.run_dir / f"{topics.group_id}.{name}.log"
        return WorkerProc(name, env, log, self.rss, module=module)


class RssMonitor:
    """Samples the resident memory of registered worker processes; keeps the peak."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self._interval_s = interval_s
        self._pids: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak_kb = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="rss", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def watch(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)

    def forget(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    def reset(self) -> float:
        """Return the peak in MB since the last reset and start over."""
        with self._lock:
            peak, self.peak_kb = self.peak_kb, 0
        return round(peak / 1024.0, 1)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            with self._lock:
                pids = list(self._pids)
            for pid in pids:
                kb = _rss_kb(pid)
                if kb is not None:
                    with self._lock:
                        self.peak_kb = max(self.peak_kb, kb)


def _rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class WorkerProc:
    """One ``modstream worker`` subprocess (stderr to a log file); ``module`` is the entry point
    run with ``-m`` (``tests.chaos.poisoned_worker`` for scenario 9)."""

    def __init__(
        self,
        name: str,
        env: dict[str, str],
        log_path: Path,
        rss: RssMonitor,
        *,
        module: str = "modstream.cli",
    ) -> None:
        self.name = name
        self._module = module
        self._env = env
        self.log_path = log_path
        self._rss = rss
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, failpoint: str | None = None) -> None:
        env = dict(self._env)
        if failpoint:
            env["MODSTREAM_FAILPOINT"] = failpoint
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", self._module, "worker"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=project_root(),
            )
        self._rss.watch(self._proc.pid)

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def kill(self) -> None:
        """SIGKILL now and reap."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
        if self._proc is not None:
            self._rss.forget(self._proc.pid)

    async def wait_exit(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        # A child process has no awaitable exit here; poll it.
        while self.alive() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        rc = self.returncode()
        if rc is not None and self._proc is not None:
            self._rss.forget(self._proc.pid)
        return rc

    async def terminate(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (drain and exit 0); SIGKILL if it does not exit within ``timeout_s``.

        The signal waits until the worker has logged ``worker_started`` (at most ``timeout_s``):
        before that its handler is not installed yet, and SIGTERM ends a process that is still
        importing (-15) with nothing to drain. On a busy machine a scenario can settle before a
        fresh worker gets that far (all records already handled by the workers before it)."""
        if self._proc is None:
            return None
        deadline = time.monotonic() + timeout_s
        while self.alive() and self.log_count("worker_started") == 0:
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        rc = await self.wait_exit(timeout_s)
        if rc is None:
            self.kill()
        return rc

    def http_port(self) -> int | None:
        """The health port the worker logged at start (``worker_started``)."""
        with contextlib.suppress(OSError):
            for line in self.log_path.read_text(errors="replace").splitlines():
                if '"worker_started"' in line:
                    with contextlib.suppress(ValueError):
                        port = orjson.loads(line).get("http_port")
                        if isinstance(port, int):
                            return port
        return None

    def log_count(self, event: str) -> int:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace").count(f'"event":"{event}"')
        return 0


class Traffic:
    """Produces good records at a steady rate in the background until stopped."""

    def __init__(
        self,
        env: ChaosEnv,
        topics: Topics,
        ledger: Ledger,
        prefix: str,
        rate_per_s: float,
        rng: random.Random,
        make: Callable[[str, int, random.Random], tuple[bytes, bytes, Outcome]] = good_record,
    ) -> None:
        self._env, self._topics, self._ledger = env, topics, ledger
        self._prefix, self._rate, self._rng, self._make = prefix, rate_per_s, rng, make
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.sent = 0

    def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None

    def _ids(self) -> Iterator[int]:
        while True:
            yield self.sent
            self.sent += 1

    async def _run(self) -> None:
        tick_s = 0.2
        per_tick = max(1, round(self._rate * tick_s))
        ids = self._ids()
        producer = AIOKafkaProducer(
            bootstrap_servers=self._env.bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            next_tick = time.monotonic()
            while not self._stop.is_set():
                chunk = [self._make(self._prefix, next(ids), self._rng) for _ in range(per_tick)]
                futures: list[tuple[Any, Outcome]] = [
                    (await producer.send(self._topics.input_topic, v, key=k), o)
                    for k, v, o in chunk
                ]
                for fut, outcome in futures:
                    meta = await fut
                    self._ledger.add(meta.partition, meta.offset, outcome)
                next_tick += tick_s
                delay = next_tick - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), delay)
        finally:
            await producer.stop()
