"""``python -m bench.rescan``: how fast ``modstream rescan`` reads history, and what a rescan
running beside live traffic costs the live produce-to-verdict latency.

Measured in one run on the local stack (its Triton and model repository, its PostgreSQL):

(h) history     — ``--history`` chat records produced to a topic of their own and decided by a
                  ``modstream worker`` (so every record has a verdict to compare with).
(r) rate        — ``modstream rescan`` (a dry run, in its own process) over that history, once
                  with ``--rate`` far above what it can reach (its own ceiling) and once at the
                  throttle it is given (``--throttle``, default the command's 200/s): records
                  read over the rescan's own span in PostgreSQL (``started_at`` to
                  ``finished_at``, so start-up is not counted).
(l) live        — a fresh worker with records offered at ``--live-rate`` for ``--live-s``
                  seconds: p99 of ``modstream_produce_to_verdict_seconds``, first alone, then
                  with a throttled rescan of the history running the whole time.

The last line is ``rescan_ceiling_per_s= rescan_throttled_per_s= throttle_per_s=
live_p99_ms= live_p99_with_rescan_ms= p99_ratio_with_rescan=``: compare the ratio, not the
times, across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg

from bench.pipeline import (
    bench_worker,
    chat_records,
    create_topic,
    run_latency,
    wait_for_verdicts,
)
from bench.pipeline_figures import ratio
from common.settings import project_root
from stack.samples import produce
from worker.settings import WorkerSettings


async def decide_history(settings: WorkerSettings, topic: str, count: int, seed: int) -> None:
    """``count`` records on ``topic``, each with a verdict."""
    await create_topic(settings.kafka, topic)
    await produce(settings.kafka, topic, chat_records(count, seed, f"{topic}-h"))
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        async with bench_worker(topic) as worker:
            await wait_for_verdicts(conn, topic, count, [worker])
    finally:
        await conn.close()


async def run_rescan(
    settings: WorkerSettings, topic: str, since: datetime, until: datetime, rate: float
) -> float:
    """A dry ``modstream rescan`` of ``topic`` at ``rate``: records read per second over its own
    span in PostgreSQL."""
    env = dict(os.environ)
    env.update(
        {
            "MODSTREAM_KAFKA__INPUT_TOPIC": topic,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": f"{topic}.verdicts",
        }
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modstream.cli",
        "rescan",
        "--since",
        since.isoformat(),
        "--until",
        until.isoformat(),
        "--model",
        settings.triton.model_name,
        "--rate",
        str(rate),
        env=env,
        cwd=project_root(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"bench: rescan exited {process.returncode}")
    line = next(x for x in out.decode().splitlines() if x.startswith("rescan_id="))
    rescan_id = uuid.UUID(line.split("=", 1)[1].split()[0])
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        row = await conn.fetchrow(
            "SELECT (report->>'read')::bigint AS read, "
            "extract(epoch FROM finished_at - started_at) AS span_s "
            "FROM rescans WHERE rescan_id = $1",
            rescan_id,
        )
    finally:
        await conn.close()
    assert row is not None
    return float(row["read"]) / max(float(row["span_s"]), 1e-9)


async def main(args: argparse.Namespace) -> None:
    settings = WorkerSettings()
    run = uuid.uuid4().hex[:8]
    history = f"bench.{run}.history"
    since = datetime.now(UTC) - timedelta(seconds=1)
    await decide_history(settings, history, args.history, args.seed)
    until = datetime.now(UTC) + timedelta(seconds=1)
    print(f"(h) history: {args.history} records decided on {history}")
    ceiling = await run_rescan(settings, history, since, until, rate=1e9)
    print(f"(r) rescan ceiling: {ceiling:9.1f} records/s (unthrottled)")
    throttled = await run_rescan(settings, history, since, until, rate=args.throttle)
    print(f"(r) rescan throttled: {throttled:9.1f} records/s at --rate {args.throttle:g}")

    count = int(args.live_rate * args.live_s)
    alone = await run_latency(
        settings,
        chat_records(count, args.seed + 1, f"{run}-alone"),
        f"bench.{run}.live-alone",
        args.live_rate,
    )
    print(f"(l) live alone: p50 {alone.p50_ms:.1f} ms, p99 {alone.p99_ms:.1f} ms")
    rescan = asyncio.create_task(run_rescan(settings, history, since, until, rate=args.throttle))
    beside = await run_latency(
        settings,
        chat_records(count, args.seed + 2, f"{run}-beside"),
        f"bench.{run}.live-beside",
        args.live_rate,
    )
    still_running = not rescan.done()
    beside_rate = await rescan
    print(
        f"(l) live beside a rescan: p50 {beside.p50_ms:.1f} ms, p99 {beside.p99_ms:.1f} ms "
        f"(the rescan read {beside_rate:.1f} records/s, "
        f"{'still running at the end' if still_running else 'ENDED BEFORE the live run did'})"
    )
    print(
        f"rescan_ceiling_per_s={ceiling:.1f} rescan_throttled_per_s={throttled:.1f} "
        f"throttle_per_s={args.throttle:g} live_p99_ms={alone.p99_ms:.1f} "
        f"live_p99_with_rescan_ms={beside.p99_ms:.1f} "
        f"p99_ratio_with_rescan={ratio(beside.p99_ms, alone.p99_ms):.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--history", type=int, default=8_000, help="records to rescan")
    parser.add_argument("--throttle", type=float, default=200.0, help="the rescan's --rate")
    parser.add_argument("--live-rate", type=float, default=100.0, help="live msgs/s offered")
    parser.add_argument("--live-s", type=float, default=30.0, help="seconds of live traffic")
    parser.add_argument("--seed", type=int, default=2027)
    asyncio.run(main(parser.parse_args()))
