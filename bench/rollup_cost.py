"""``python -m bench.rollup_cost``: what keeping the analysts' rollups costs the write path.

Three databases, migrated the same way but for the rollups:

- ``none``    — the schema before ``migrations/0070_rollups.sql``: no rollups at all;
- ``job``     — the product: all migrations, and the periodic job (``modstream_rollups_refresh``)
                counting rows past its snapshot watermark every ``--job-interval-s`` (the worker's
                own refresher in the e2e runs, with its default interval);
- ``trigger`` — all migrations, plus the alternative measured against the job: statement-level
                triggers (``TRIGGER_SQL`` below) that update the same rollups, through the same
                ``modstream_rollups_apply``, inside every verdict INSERT and UPDATE.

Two measurements, the ways interleaved in every round:

(1) **batch** — the worker's own write path (``VerdictBatchStore.write`` of ``--batch`` verdicts,
    then ``VerdictOutboxStore.mark_published`` of them, as the stream does): wall time per batch
    and the CPU of the PostgreSQL backend serving the connection (``/proc/PID/stat``: the
    neighbours' load hardly moves it; the clock ticks every 10 ms, hence the many rounds). For
    ``job`` the job backend's CPU is added, per verdict it counted.
(2) **e2e** — ``bench.pipeline``'s end-to-end run (a ``modstream worker`` over ``--messages``
    records already in Kafka, the stack's fixture model), ``--rounds`` rounds; then one round with
    ``--real-rounds`` rounds with the real models (``--real-repository``, ``--real-messages``)
    unless ``--skip-real``.

Last line: ``batch_cpu_job_over_none= batch_cpu_trigger_over_none= e2e_job_over_none=
e2e_trigger_over_none= real_e2e_job_over_none= real_e2e_trigger_over_none=`` (CPU ratios of
means; rate ratios of medians: 0.95 means 5 % fewer messages per second).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from pydantic import SecretStr

from bench.pipeline import chat_records, real_triton, run_e2e
from bench.pipeline_figures import NAN, ratio
from bench.scratch_db import scratch_database
from common.rollups import refresh_rollups
from common.settings import PostgresSettings, project_root
from engine.stores.database import Database
from engine.stores.verdict_batches import VerdictBatch, VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from pipelines.decode import decode_message
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.scores import ModelScores
from pipelines.verdict import Verdict
from pipelines.verdict_codec import verdict_row_key
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict
from worker.settings import WorkerSettings

__all__ = ["TRIGGER_SQL", "WAYS", "backend_cpu_s", "main"]

WAYS = ("none", "job", "trigger")
_BEFORE_ROLLUPS = 61
"""The last migration before 0070_rollups (the ``none`` database)."""
_GROUP = "bench-rollup-cost"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

TRIGGER_SQL = """
DROP TRIGGER verdicts_rollups_update ON verdicts;

CREATE FUNCTION bench_rollups_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM modstream_rollups_apply('{}', ARRAY(SELECT n::verdicts FROM new_rows AS n));
    RETURN NULL;
END;
$$;

-- Transition tables cannot go with a column list (UPDATE OF ...), so every UPDATE fires this,
-- the outbox's `SET published = true` included; pairs whose counted columns are equal are
-- dropped before anything is written.
CREATE FUNCTION bench_rollups_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_old verdicts[];
    changed_new verdicts[];
BEGIN
    changed_old := ARRAY(
        SELECT o::verdicts FROM old_rows AS o
        WHERE NOT EXISTS (
            SELECT FROM new_rows AS n
            WHERE (n.source_topic, n.source_partition, n.source_offset, n.sent_at)
                = (o.source_topic, o.source_partition, o.source_offset, o.sent_at)
              AND (n.decision, n.decided_by, n.escalated, n.category, n.rule_hits,
                   n.inference_ms, n.model_version)
                  IS NOT DISTINCT FROM
                  (o.decision, o.decided_by, o.escalated, o.category, o.rule_hits,
                   o.inference_ms, o.model_version)));
    changed_new := ARRAY(
        SELECT n::verdicts FROM new_rows AS n
        WHERE NOT EXISTS (
            SELECT FROM old_rows AS o
            WHERE (n.source_topic, n.source_partition, n.source_offset, n.sent_at)
                = (o.source_topic, o.source_partition, o.source_offset, o.sent_at)
              AND (n.decision, n.decided_by, n.escalated, n.category, n.rule_hits,
                   n.inference_ms, n.model_version)
                  IS NOT DISTINCT FROM
                  (o.decision, o.decided_by, o.escalated, o.category, o.rule_hits,
                   o.inference_ms, o.model_version)));
    IF cardinality(changed_old) > 0 OR cardinality(changed_new) > 0 THEN
        PERFORM modstream_rollups_apply(changed_old, changed_new);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER bench_rollups_insert AFTER INSERT ON verdicts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bench_rollups_on_insert();
CREATE TRIGGER bench_rollups_update AFTER UPDATE ON verdicts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bench_rollups_on_update();
"""
"""The in-transaction alternative (installed only in the bench's ``trigger`` database)."""


def backend_cpu_s(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (a PostgreSQL backend on this machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


class _Job:
    """The ``job`` way in part (1): a refresh every ``interval_s``, its backend CPU counted."""

    def __init__(self, dsn: str, interval_s: float) -> None:
        self._dsn = dsn
        self._interval_s = interval_s
        self.rows = 0
        self.cpu_s = 0.0
        self.runs = 0

    async def run(self, stop: asyncio.Event) -> None:
        conn = await asyncpg.connect(self._dsn)
        try:
            pid = int(await conn.fetchval("SELECT pg_backend_pid()"))
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._interval_s)
                before = backend_cpu_s(pid)
                counted = await refresh_rollups(conn)
                self.cpu_s += backend_cpu_s(pid) - before
                self.rows += counted or 0
                self.runs += 1
                if stop.is_set():
                    return
        finally:
            await conn.close()


@contextlib.asynccontextmanager
async def _running_job(dsn: str, interval_s: float) -> AsyncIterator[_Job]:
    job = _Job(dsn, interval_s)
    stop = asyncio.Event()
    task = asyncio.create_task(job.run(stop))
    try:
        yield job
    finally:
        stop.set()  # one last refresh counts what is left
        await task


@contextlib.asynccontextmanager
async def _databases(admin_dsn: str) -> AsyncIterator[dict[str, str]]:
    """The three scratch databases, by way."""
    async with contextlib.AsyncExitStack() as stack:
        dsns = {
            "none": await stack.enter_async_context(
                scratch_database(admin_dsn, "modstream_bench_none", up_to=_BEFORE_ROLLUPS)
            ),
            "job": await stack.enter_async_context(
                scratch_database(admin_dsn, "modstream_bench_job")
            ),
            "trigger": await stack.enter_async_context(
                scratch_database(admin_dsn, "modstream_bench_trigger")
            ),
        }
        conn = await asyncpg.connect(dsns["trigger"])
        try:
            await conn.execute(TRIGGER_SQL)
        finally:
            await conn.close()
        yield dsns


@functools.cache
def _engine() -> RuleEngine:
    return RuleEngine(default_ruleset())


def _verdicts(topic: str, first: int, count: int, rng: random.Random) -> list[Verdict]:
    """A realistic batch: bench.pipeline's chat lines (50 groups, 5,000 senders) through the
    real rules, model scores drawn at random (about one message in ten harmful)."""
    records = chat_records(count, rng.randrange(1 << 30), f"rc-{first}")
    run = ModelRun("moderation", "1", str(uuid.uuid4()), 40.0)
    out = []
    for i, record in enumerate(records):
        message = decode_message(record.value, max_bytes=1 << 20)
        toxicity = (0.2, 0.3, 0.5) if rng.random() < 0.1 else (0.9, 0.07, 0.03)
        scores = ModelScores((0.2, 0.5, 0.3), (0.7, 0.1, 0.1, 0.1), toxicity)
        facts = MessageFacts.of(SourcePosition(topic, i % 4, first + i), message)
        outcome = _engine().evaluate(message)
        out.append(
            make_verdict(
                facts, outcome, scores, PolicyThresholds(), run, queue_ms=rng.uniform(1, 80)
            )
        )
    return out


async def measure_batches(
    figures: dict[str, float], admin_dsn: str, rounds: int, batch: int, job_interval_s: float
) -> None:
    """Part (1): per-batch wall time and backend CPU of the worker's write path, per way."""
    rng = random.Random(2026)
    wall: dict[str, list[float]] = {w: [] for w in WAYS}
    cpu: dict[str, list[float]] = {w: [] for w in WAYS}
    async with _databases(admin_dsn) as dsns, contextlib.AsyncExitStack() as stack:
        stores: dict[str, tuple[VerdictBatchStore, VerdictOutboxStore, int]] = {}
        for way in WAYS:
            settings = PostgresSettings(dsn=SecretStr(dsns[way]), min_pool_size=1, max_pool_size=1)
            database = await stack.enter_async_context(Database(settings))
            pid = int(await database.pool().fetchval("SELECT pg_backend_pid()"))
            stores[way] = (VerdictBatchStore(database, _GROUP), VerdictOutboxStore(database), pid)
        job = await stack.enter_async_context(_running_job(dsns["job"], job_interval_s))
        offset = 0
        for round_ in range(rounds):
            for way in WAYS if round_ % 2 else tuple(reversed(WAYS)):
                verdicts = _verdicts("bench.rollup", offset, batch, rng)
                offset += batch
                writer, outbox, pid = stores[way]
                cpu_before, started = backend_cpu_s(pid), time.perf_counter()
                await writer.write(VerdictBatch(verdicts))
                await outbox.mark_published([verdict_row_key(v) for v in verdicts])
                wall[way].append(time.perf_counter() - started)
                cpu[way].append(backend_cpu_s(pid) - cpu_before)
    job_cpu = job.cpu_s / job.rows * batch if job.rows else NAN
    for way in WAYS:
        extra = f" + job {job_cpu * 1000:.2f} ms" if way == "job" else ""
        print(
            f"(1) {way:8s} {statistics.median(wall[way]) * 1000:7.2f} ms wall (median), "
            f"backend CPU {statistics.mean(cpu[way]) * 1000:6.2f} ms{extra} per batch of {batch}"
        )
    print(f"(1) job: {job.runs} refreshes counted {job.rows} rows in {job.cpu_s:.2f} s of CPU")
    base = statistics.mean(cpu["none"])
    figures["batch_cpu_job_over_none"] = ratio(statistics.mean(cpu["job"]) + job_cpu, base)
    figures["batch_cpu_trigger_over_none"] = ratio(statistics.mean(cpu["trigger"]), base)


def _env_for(way: str, dsn: str) -> dict[str, str]:
    env = {"MODSTREAM_POSTGRES__DSN": dsn}
    if way != "job":
        env["MODSTREAM_ROLLUPS__REFRESH_INTERVAL_S"] = "0"
    return env


async def _e2e(
    settings: WorkerSettings,
    dsn: str,
    records: list[Any],
    topic: str,
    way: str,
    extra_env: dict[str, str] | None = None,
) -> float:
    scoped = settings.model_copy(
        update={"postgres": settings.postgres.model_copy(update={"dsn": SecretStr(dsn)})}
    )
    env = {**(extra_env or {}), **_env_for(way, dsn)}
    result = await run_e2e(scoped, records, topic, env=env)
    print(f"(2) {topic:34s} {result.describe()}")
    return result.msgs_per_s


async def measure_e2e(figures: dict[str, float], args: argparse.Namespace) -> None:
    """Part (2): bench.pipeline's e2e rate per way, interleaved; then the real models."""
    settings = WorkerSettings()
    admin_dsn = settings.postgres.dsn.get_secret_value()
    run = uuid.uuid4().hex[:8]
    rates: dict[str, list[float]] = {w: [] for w in WAYS}
    real: dict[str, list[float]] = {w: [] for w in WAYS}
    async with _databases(admin_dsn) as dsns:
        for round_ in range(args.rounds):
            for way in WAYS if round_ % 2 else tuple(reversed(WAYS)):
                records = chat_records(args.messages, args.seed + round_, f"rc-{run}-{round_}")
                topic = f"bench.rollup.{run}.{round_}.{way}"
                rates[way].append(await _e2e(settings, dsns[way], records, topic, way))
        if not args.skip_real:
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
                    for round_ in range(args.real_rounds):
                        for way in WAYS if round_ % 2 else tuple(reversed(WAYS)):
                            records = chat_records(
                                args.real_messages, args.seed + round_, f"rc-{run}-r{round_}"
                            )
                            topic = f"bench.rollup.{run}.real{round_}.{way}"
                            real[way].append(
                                await _e2e(real_settings, dsns[way], records, topic, way, env)
                            )
            except RuntimeError as exc:
                print(f"real models not measured: {exc}")
    medians = {w: statistics.median(v) for w, v in rates.items()}
    figures["e2e_job_over_none"] = ratio(medians["job"], medians["none"])
    figures["e2e_trigger_over_none"] = ratio(medians["trigger"], medians["none"])
    if all(real.values()):
        best = {w: statistics.median(v) for w, v in real.items()}
        figures["real_e2e_job_over_none"] = ratio(best["job"], best["none"])
        figures["real_e2e_trigger_over_none"] = ratio(best["trigger"], best["none"])


def summary(figures: dict[str, float], names: Sequence[str]) -> str:
    return " ".join(f"{n}={figures.get(n, NAN):.3f}" for n in names)


async def main(args: argparse.Namespace) -> None:
    admin_dsn = WorkerSettings().postgres.dsn.get_secret_value()
    print(f"started {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    figures: dict[str, float] = {}
    if not args.skip_batch:
        await measure_batches(
            figures, admin_dsn, args.batch_rounds, args.batch, args.job_interval_s
        )
    if not args.skip_e2e:
        await measure_e2e(figures, args)
    print(
        summary(
            figures,
            (
                "batch_cpu_job_over_none",
                "batch_cpu_trigger_over_none",
                "e2e_job_over_none",
                "e2e_trigger_over_none",
                "real_e2e_job_over_none",
                "real_e2e_trigger_over_none",
            ),
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batch-rounds", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="e2e rounds (fixture model)")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--real-messages", type=int, default=2_000)
    parser.add_argument("--real-rounds", type=int, default=3)
    parser.add_argument("--real-repository", type=Path, default=project_root() / "model_repository")
    parser.add_argument(
        "--job-interval-s",
        type=float,
        default=WorkerSettings().rollups.refresh_interval_s,
        help="part (1): seconds between refreshes (the worker's default)",
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--skip-batch", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--skip-real", action="store_true")
    asyncio.run(main(parser.parse_args()))
