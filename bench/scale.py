"""``python -m bench.scale``: one worker against two on the same four partitions (fixture model).

For each case, fresh topic, the workers (one consumer group) are started and given
``--settle-s`` to share the partitions, then ``--messages`` records are produced at once; the rate
runs from the start of production to the last verdict row. Besides the rates it prints the
workers' CPU per message and how busy the whole machine was (``/proc/stat``), which is what says
whether a second process can help: on a machine with no idle CPU left it cannot.

Last line: ``one_worker_msgs_per_s= two_workers_msgs_per_s= scaling= one_worker_cpu_us_per_msg=
two_workers_cpu_us_per_msg= machine_busy_one= machine_busy_two=``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass

import asyncpg

from bench.pipeline import bench_worker, chat_records, create_topic, wait_for_verdicts
from bench.pipeline_figures import ratio
from bench.process_stats import busy_fraction, machine_ticks, sample
from stack.samples import produce
from worker.settings import WorkerSettings

__all__ = ["ScaleRun", "run_workers"]

_FIRST_PORT = 18093


@dataclass(frozen=True, slots=True)
class ScaleRun:
    """One case: its rate, the workers' CPU per message, the machine's busy share."""

    msgs_per_s: float
    cpu_us_per_msg: float
    machine_busy: float


async def run_workers(
    settings: WorkerSettings, workers: int, count: int, settle_s: float, tag: str
) -> ScaleRun:
    topic = f"scale.{tag}.{workers}w"
    records = chat_records(count, workers, f"scale-{tag}-{workers}")
    await create_topic(settings.kafka, topic)
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        async with contextlib.AsyncExitStack() as stack:
            running = [
                await stack.enter_async_context(bench_worker(topic, http_port=_FIRST_PORT + i))
                for i in range(workers)
            ]
            await asyncio.sleep(settle_s)  # the group's rebalance hands out the partitions
            pids = [w.process.pid for w in running]
            cpu_before = sum(sample(pid).cpu_s for pid in pids)
            ticks_before = machine_ticks()
            started = time.perf_counter()
            await produce(settings.kafka, topic, records)
            await wait_for_verdicts(conn, topic, count, running)
            elapsed = time.perf_counter() - started
            busy = busy_fraction(ticks_before, machine_ticks())
            cpu = sum(sample(pid).cpu_s for pid in pids) - cpu_before
    finally:
        await conn.close()
    return ScaleRun(count / elapsed, cpu / count * 1e6, busy)


async def main(args: argparse.Namespace) -> None:
    settings = WorkerSettings()
    tag = uuid.uuid4().hex[:8]
    one = await run_workers(settings, 1, args.messages, args.settle_s, tag)
    print(
        f"1 worker:  {one.msgs_per_s:8.1f} msgs/s, {one.cpu_us_per_msg:.0f} us CPU/msg, "
        f"machine busy {one.machine_busy:.0%}"
    )
    two = await run_workers(settings, 2, args.messages, args.settle_s, tag)
    print(
        f"2 workers: {two.msgs_per_s:8.1f} msgs/s, {two.cpu_us_per_msg:.0f} us CPU/msg, "
        f"machine busy {two.machine_busy:.0%}"
    )
    print(
        f"one_worker_msgs_per_s={one.msgs_per_s:.1f} two_workers_msgs_per_s={two.msgs_per_s:.1f} "
        f"scaling={ratio(two.msgs_per_s, one.msgs_per_s):.2f} "
        f"one_worker_cpu_us_per_msg={one.cpu_us_per_msg:.0f} "
        f"two_workers_cpu_us_per_msg={two.cpu_us_per_msg:.0f} "
        f"machine_busy_one={one.machine_busy:.2f} machine_busy_two={two.machine_busy:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--settle-s", type=float, default=10.0)
    asyncio.run(main(parser.parse_args()))
