"""``python -m bench.sink``: three ways to write a batch of verdicts to PostgreSQL, interleaved.

- ``unnest``: the previous write: ``BEGIN``, one ``INSERT ... SELECT FROM unnest($arrays)`` for
  the verdicts, the offsets upsert, ``COMMIT``; asyncpg's full reset when the connection returns
  to the pool;
- ``copy``: binary ``COPY`` into a temporary staging table, then one ``INSERT ... SELECT ... ON
  CONFLICT`` (``bench.staging_sql``), the offsets upsert, in one transaction, same reset;
- ``one``: the worker's write now: the same ``unnest`` inserts as parts of one statement
  (``engine.stores.one_statement``), same reset.

Each round writes one batch of ``--batch`` verdicts each way (order alternating), ``--rounds``
rounds. Printed: wall time and this process's CPU per batch, then the line
``copy_over_unnest_wall= copy_over_unnest_cpu= one_over_unnest_wall= one_over_unnest_cpu=``.
The bench connects with the stack's DSN (the owner role: the worker's own role may not create
temporary tables, which the ``copy`` way would need).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from bench.pipeline_figures import ratio
from bench.staging_sql import VERDICT_STAGE_TYPES, insert_from_staging_sql, staging_table_sql
from engine.stores.one_statement import one_statement
from engine.stores.verdict_batches import VerdictBatch, batch_parts
from pipelines.messages import SourcePosition
from pipelines.policy import PolicyThresholds
from pipelines.rule_hits import RuleOutcome
from pipelines.scores import ModelScores
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VERDICT_COLUMNS, verdict_row
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict
from worker.settings import WorkerSettings

__all__ = ["main"]

_STAGE = "bench_verdicts_stage"
_GROUP = "bench-sink"
_WAYS = ("unnest", "copy", "one")


def _verdicts(topic: str, first: int, count: int) -> list[Verdict]:
    run = ModelRun("moderation", "1", str(uuid.uuid4()), 3.0)
    scores = ModelScores((0.2, 0.5, 0.3), (0.7, 0.1, 0.1, 0.1), (0.8, 0.15, 0.05))
    return [
        make_verdict(
            MessageFacts(
                SourcePosition(topic, offset % 4, offset),
                f"m-{offset}",
                f"group-{offset % 50}",
                f"user-{offset % 5000}",
                datetime.now(UTC),
                "ab" * 32,
            ),
            RuleOutcome(),
            scores,
            PolicyThresholds(),
            run,
            queue_ms=1.0,
        )
        for offset in range(first, first + count)
    ]


async def _write(way: str, pools: dict[str, Any], verdicts: list[Verdict], topic: str) -> None:
    batch = VerdictBatch(verdicts, offsets={(topic, 0): verdicts[-1].position.offset + 1})
    parts = batch_parts(batch, _GROUP)  # [verdicts insert, offsets upsert]
    if way == "one":
        sql, args = one_statement(parts)
        await pools["reset"].execute(sql, *args)
        return
    async with pools["reset"].acquire() as conn, conn.transaction():
        if way == "unnest":
            await conn.execute(parts[0][0], *parts[0][1])
        else:
            await conn.copy_records_to_table(
                _STAGE, records=[verdict_row(v) for v in verdicts], columns=VERDICT_COLUMNS
            )
            await conn.execute(insert_from_staging_sql("verdicts", _STAGE, VERDICT_COLUMNS))
        await conn.execute(parts[1][0], *parts[1][1])


async def main(args: argparse.Namespace) -> None:
    dsn = WorkerSettings().postgres.dsn.get_secret_value()
    stage = staging_table_sql(_STAGE, VERDICT_COLUMNS, VERDICT_STAGE_TYPES)

    async def init(conn: asyncpg.Connection[Any]) -> None:
        await conn.execute(stage)

    pools: dict[str, Any] = {
        "reset": await asyncpg.create_pool(dsn, min_size=1, max_size=1, init=init),
    }
    topic = f"bench.sink.{uuid.uuid4().hex[:8]}"
    wall = dict.fromkeys(_WAYS, 0.0)
    cpu = dict.fromkeys(_WAYS, 0.0)
    offset = 0
    try:
        for round_ in range(args.rounds):
            for way in _WAYS if round_ % 2 else reversed(_WAYS):
                verdicts = _verdicts(topic, offset, args.batch)
                offset += args.batch
                started, cpu_started = time.perf_counter(), time.process_time()
                await _write(way, pools, verdicts, topic)
                wall[way] += time.perf_counter() - started
                cpu[way] += time.process_time() - cpu_started
        for way in _WAYS:
            print(
                f"{way:7s} {wall[way] / args.rounds * 1000:7.2f} ms wall, "
                f"{cpu[way] / args.rounds * 1000:5.2f} ms CPU per batch of {args.batch}"
            )
        print(
            f"copy_over_unnest_wall={ratio(wall['copy'], wall['unnest']):.3f} "
            f"copy_over_unnest_cpu={ratio(cpu['copy'], cpu['unnest']):.3f} "
            f"one_over_unnest_wall={ratio(wall['one'], wall['unnest']):.3f} "
            f"one_over_unnest_cpu={ratio(cpu['one'], cpu['unnest']):.3f}"
        )
    finally:
        async with pools["reset"].acquire() as conn:
            await conn.execute("DELETE FROM verdicts WHERE source_topic = $1", topic)
            await conn.execute("DELETE FROM consumer_offsets WHERE consumer_group = $1", _GROUP)
        for pool in pools.values():
            await pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=100)
    asyncio.run(main(parser.parse_args()))
