"""``python -m bench.pipeline``: modstream end to end against its ceiling and a naive loop.

All three are measured in one run on the local stack, over the same generated chat traffic:

(a) e2e      — records already in Kafka; a ``modstream worker`` process consumes them until every
               one has a verdict row (rate over the time from the worker's readiness to the last
               row).
(b) ceiling  — the same Triton model driven directly at batch ``max_items`` with ``max_in_flight``
               calls in flight: what inference alone allows.
(c) naive    — per message: decode, rules, one infer call, one INSERT in its own transaction.

The last line is ``e2e_msgs_per_s=A ceiling_msgs_per_s=B naive_msgs_per_s=C ratio_ceiling=A/B
ratio_naive=A/C``. Ratios, not absolute rates, are what to compare across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
import urllib.request
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings
from pipelines.decode import decode_message
from pipelines.messages import SourcePosition
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.verdict_factory import MessageFacts, ModelRun, make_verdict
from stack.samples import SampleRecord, load_texts, produce
from stack.settings import StackSettings
from worker.inference import TritonModerationClient
from worker.settings import WorkerSettings
from worker.stores.database import Database
from worker.stores.verdict_batches import VerdictBatch, VerdictBatchStore

_PARTITIONS = 4
_BENCH_HTTP_PORT = 18089


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


async def _create_topic(kafka: KafkaSettings, topic: str) -> None:
    admin = AIOKafkaAdminClient(**kafka_client_kwargs(kafka))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, _PARTITIONS, 1)])
    finally:
        await admin.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (local URL)
            return bool(response.status == 200)
    except OSError:
        return False


async def run_e2e(settings: WorkerSettings, records: list[SampleRecord], topic: str) -> float:
    await _create_topic(settings.kafka, topic)
    await produce(settings.kafka, topic, records)
    env = dict(os.environ)
    env.update(
        {
            "MODSTREAM_KAFKA__INPUT_TOPIC": topic,
            "MODSTREAM_KAFKA__GROUP_ID": f"bench-{topic}",
            "MODSTREAM_KAFKA__VERDICT_TOPIC": f"{topic}.verdicts",
            "MODSTREAM_HTTP__PORT": str(_BENCH_HTTP_PORT),
        }
    )
    log_path = StackSettings().state_dir / "bench-worker.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "modstream.cli", "worker", env=env, stdout=log, stderr=log
        )
    conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
    try:
        url = f"http://127.0.0.1:{_BENCH_HTTP_PORT}/readyz"
        while not await asyncio.to_thread(_ready, url):
            if worker.returncode is not None:
                raise SystemExit(f"bench: the worker exited during start-up; see {log_path}")
            await asyncio.sleep(0.1)
        started = time.perf_counter()
        while True:
            done = await conn.fetchval(
                "SELECT count(*) FROM verdicts WHERE source_topic = $1", topic
            )
            if done >= len(records):
                break
            if worker.returncode is not None:
                raise SystemExit(f"bench: the worker died mid-run; see {log_path}")
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
        if worker.returncode is None:
            worker.terminate()
        await worker.wait()
    return len(records) / elapsed


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


async def main(count: int, naive_count: int, seed: int) -> None:
    settings = WorkerSettings()
    run = uuid.uuid4().hex[:8]
    records = chat_records(count, seed, f"bench-{run}")
    texts = [orjson.loads(r.value)["text"] for r in records]
    mean_chars = sum(len(t) for t in texts) / len(texts)
    print(
        f"messages={count} mean_chars={mean_chars:.0f} max_items={settings.batch.max_items} "
        f"max_in_flight={settings.batch.max_in_flight} model={settings.triton.model_name}"
    )
    e2e = await run_e2e(settings, records, f"bench.{run}.chat")
    print(f"(a) e2e:     {e2e:9.1f} msgs/s over {count} messages")
    ceiling = await run_ceiling(settings, texts)
    print(f"(b) ceiling: {ceiling:9.1f} msgs/s (Triton alone, batch {settings.batch.max_items})")
    naive = await run_naive(settings, records[:naive_count], f"bench.{run}.naive")
    print(f"(c) naive:   {naive:9.1f} msgs/s over {naive_count} messages")
    print(
        f"e2e_msgs_per_s={e2e:.1f} ceiling_msgs_per_s={ceiling:.1f} naive_msgs_per_s={naive:.1f} "
        f"ratio_ceiling={e2e / ceiling:.3f} ratio_naive={e2e / naive:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--naive-messages", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.naive_messages, args.seed))
