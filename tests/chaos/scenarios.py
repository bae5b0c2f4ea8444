"""The chaos scenarios (1-12). Each returns a ``ScenarioResult`` with its ledger and figures."""

from __future__ import annotations

import asyncio
import random
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from common.settings import project_root
from engine.failpoints import FAILPOINT_NAMES
from pipelines.rules import RuleLoadError, load_ruleset
from pipelines.rules.config import compile_re2
from stack import LocalStack, private_triton
from stack.kafka_tools import end_offsets
from stack.settings import StackToolSettings
from tests.chaos.harness import (
    ChaosEnv,
    Ledger,
    Outcome,
    ScenarioResult,
    Topics,
    Traffic,
    WorkerProc,
    expected_outcome,
    good_record,
)
from tests.chaos.poisoned_worker import POISON_PREFIX

__all__ = ["SCENARIOS", "Sizes"]


@dataclass(frozen=True, slots=True)
class Sizes:
    """Message counts and durations; ``--quick`` scales them down."""

    kill_messages: int = 20_000
    random_kills: int = 20
    failpoint_messages: int = 300
    outage_s: float = 60.0
    outage_rate_per_s: float = 100.0
    kafka_messages: int = 5_000
    scale_rate_per_s: float = 150.0
    bad_records: int = 10_000
    good_with_bad: int = 5_000
    huge_records: int = 3
    rules_messages: int = 200
    settle_timeout_s: float = 300.0
    outage_in_flight_limit: int = 2_000
    """``batch.max_records_in_flight`` of the worker during outages (low enough to pause)."""
    sigterm_messages: int = 3_000
    """Records produced before each SIGTERM of scenario 8."""
    sigterm_drain_s: float = 5.0
    """``batch.drain_timeout_s`` of scenario 8's workers; each must exit within it + 5 s."""
    sigterm_rounds: int = 3
    """Scenario 8: SIGTERMs per configuration (Kafka down; Kafka and PostgreSQL down)."""
    poison_messages: int = 2_000
    poison_every: int = 50
    """Scenario 9: every this many records is one the driver refuses to encode."""
    oversize_records: int = 4
    """Scenario 11: records whose key plus value exceed the producer's request limit."""
    rejected_texts: int = 20
    rescore_messages: int = 1_000
    """Scenario 12: texts the model refuses, among this many records."""


QUICK = Sizes(
    kill_messages=4_000,
    random_kills=3,
    failpoint_messages=150,
    outage_s=10.0,
    outage_rate_per_s=60.0,
    kafka_messages=1_000,
    scale_rate_per_s=60.0,
    bad_records=600,
    good_with_bad=400,
    huge_records=1,
    rules_messages=50,
    settle_timeout_s=180.0,
    outage_in_flight_limit=200,
    sigterm_messages=1_000,
    sigterm_rounds=1,
    poison_messages=400,
    poison_every=20,
    oversize_records=2,
    rejected_texts=5,
    rescore_messages=300,
)


async def _finish(
    env: ChaosEnv,
    topics: Topics,
    ledger: Ledger,
    result: ScenarioResult,
    workers: list[WorkerProc],
    timeout_s: float,
) -> float | None:
    """Wait until settled, stop the workers (SIGTERM, expect exit 0), check the ledger."""
    try:
        settled = await env.wait_settled(
            topics, ledger, timeout_s, [w for w in workers if w.alive()]
        )
    except RuntimeError as exc:
        result.failures.append(str(exc))
        settled = None
    if settled is None and not result.failures:
        result.failures.append(f"not settled within {timeout_s:.0f}s")
    for w in workers:
        if w.alive():
            rc = await w.terminate()
            result.check(rc == 0, f"worker {w.name} exited {rc} on SIGTERM")
    result.apply_ledger(await ledger.check(env, topics))
    return settled


async def _wait_restarted(
    env: ChaosEnv, topics: Topics, ledger: Ledger, before: int, timeout_s: float
) -> float | None:
    """Seconds until the outcome count moves past ``before`` (progress resumed); ``None`` when
    nothing was left to do."""
    if before >= len(ledger):
        return None
    started = time.monotonic()
    await env.wait_handled(topics, before + 1, timeout_s, interval_s=0.1)
    return time.monotonic() - started


# -- 1. kill -9 at random moments and at every failpoint ---------------------------------------


async def kill_nine(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(1, "kill -9 at random moments and at every failpoint")
    topics = await env.new_topics("kill")
    ledger = Ledger()
    records = [good_record("kill", i, rng) for i in range(sizes.kill_messages)]
    await env.produce(topics, ledger, records)
    worker = env.worker(topics, "w0", instance_id="chaos-kill-w0")
    points = sorted(
        rng.sample(range(int(0.05 * len(records)), int(0.7 * len(records))), sizes.random_kills)
    )
    kills = 0
    restarts: list[float | None] = []
    worker.start()
    for point in points:
        if not await env.wait_handled(topics, point, timeout_s=120):
            result.failures.append(f"no progress to {point} records before kill {kills + 1}")
            break
        worker.kill()
        kills += 1
        before = await env.handled(topics) or 0
        result.check(before < len(ledger), f"kill {kills} landed after the run finished")
        worker.start()
        restarts.append(await _wait_restarted(env, topics, ledger, before, timeout_s=120))
    failpoint_kills: dict[str, bool] = {}
    counts = {"after_rules": 40}
    for n, name in enumerate(FAILPOINT_NAMES):
        more = [good_record(f"kill-fp{n}", i, rng) for i in range(sizes.failpoint_messages)]
        # Let the running worker settle first so the armed one meets fresh traffic.
        await env.wait_settled(topics, ledger, 120, [])
        await worker.terminate()
        armed = env.worker(topics, f"fp-{name}", instance_id="chaos-kill-w0")
        armed.start(f"{name}@{counts.get(name, 1)}")
        await env.produce(topics, ledger, more)
        rc = await armed.wait_exit(120)
        failpoint_kills[name] = rc == -9
        result.check(rc == -9, f"failpoint {name} did not SIGKILL the worker (rc {rc})")
        if rc is None:
            armed.kill()
        kills += rc == -9
        before = await env.handled(topics) or 0
        worker = env.worker(topics, "w0", instance_id="chaos-kill-w0")
        worker.start()
        restarts.append(await _wait_restarted(env, topics, ledger, before, timeout_s=120))
    await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    result.kills = kills
    waits = sorted(r for r in restarts if r is not None)
    result.recovery_s = round(waits[-1], 1) if waits else None
    result.figures.update(
        random_kills=len(points),
        failpoints=failpoint_kills,
        restart_to_progress_s_median=round(waits[len(waits) // 2], 1) if waits else None,
    )
    return result


# -- 2. / 3. a dependency stopped for a while -------------------------------------------------


def _readyz(port: int | None) -> int | None:
    if port is None:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


async def _outage(
    env: ChaosEnv,
    sizes: Sizes,
    rng: random.Random,
    number: int,
    service: str,
) -> ScenarioResult:
    result = ScenarioResult(number, f"{service} stopped for {sizes.outage_s:.0f} s mid-run")
    topics = await env.new_topics(service)
    ledger = Ledger()
    limit = sizes.outage_in_flight_limit
    worker = env.worker(
        topics,
        "w0",
        extra_env={
            "MODSTREAM_BATCH__MAX_RECORDS_IN_FLIGHT": str(limit),
            "MODSTREAM_KAFKA__MAX_POLL_RECORDS": str(min(500, limit)),
        },
    )
    worker.start()
    traffic = Traffic(env, topics, ledger, service, sizes.outage_rate_per_s, rng)
    traffic.start()
    target = LocalStack(StackToolSettings()).services[service]
    if service == "triton" and env.triton is not None:
        target = env.triton  # the run's private Triton (``--model-repository``)
    await asyncio.sleep(10)
    before = await env.handled(topics) or 0
    result.peak_rss_mb = env.rss.reset()
    produced_at_stop = len(ledger)
    await asyncio.to_thread(target.stop)
    stopped_at = time.monotonic()
    readiness: list[int | None] = []
    pending_peak = 0
    while time.monotonic() - stopped_at < sizes.outage_s:
        await asyncio.sleep(2)
        readiness.append(await asyncio.to_thread(_readyz, worker.http_port()))
        if service == "triton":
            counts = await env.counts(topics)
            if counts is not None:
                pending_peak = max(pending_peak, counts[2])
    during = await env.handled(topics) if service != "postgres" else None
    outage_rss = env.rss.reset()
    result.peak_rss_mb = max(result.peak_rss_mb, outage_rss)
    restart_began = time.monotonic()
    await asyncio.to_thread(target.start)
    back_at = time.monotonic()
    produced_at_back = len(ledger)
    # Recovery: from the service answering again until the backlog is worked off (Postgres:
    # every record produced so far has its outcome; Triton: no verdict is pending_model).
    while time.monotonic() - back_at < 300:
        counts = await env.counts(topics)
        if counts is not None and (
            counts[2] == 0 if service == "triton" else counts[0] + counts[1] >= produced_at_back
        ):
            result.recovery_s = round(time.monotonic() - back_at, 1)
            break
        await asyncio.sleep(0.25)
    await asyncio.sleep(max(0.0, 10 - (time.monotonic() - back_at)))
    await traffic.stop()
    await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    result.check(result.recovery_s is not None, "the backlog was not worked off within 300 s")
    during_outage = produced_at_back - produced_at_stop
    result.figures.update(
        outage_peak_rss_mb=outage_rss,
        produced_during_outage=during_outage,
        service_start_s=round(back_at - restart_began, 1),
    )
    if service == "triton":
        result.check(pending_peak > 0, "no pending_model verdicts were written during the outage")
        result.check(
            during is not None and during > before,
            "verdicts stopped flowing while Triton was down",
        )
        result.figures.update(
            pending_model_peak=pending_peak,
            verdicts_during_outage=(during or 0) - before,
        )
    else:
        result.check(503 in readiness, f"/readyz never reported unready: {readiness}")
        paused = worker.log_count("consumer_paused")
        if during_outage > 2 * limit:
            # More arrived than the worker may hold in flight: it must have paused.
            result.check(paused > 0, "the consumer never paused with Postgres down")
        result.figures.update(
            readyz_during_outage=sorted({r for r in readiness if r}),
            paused_times=paused,
            in_flight_limit=limit,
        )
    return result


async def triton_down(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    return await _outage(env, sizes, rng, 2, "triton")


async def postgres_down(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    return await _outage(env, sizes, rng, 3, "postgres")


# -- 4. Kafka broker restart -------------------------------------------------------------------


async def kafka_restart(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(4, "Kafka broker restarted mid-run")
    topics = await env.new_topics("kafka")
    ledger = Ledger()
    backlog = [good_record("kafka-backlog", i, rng) for i in range(sizes.kafka_messages)]
    await env.produce(topics, ledger, backlog)
    worker = env.worker(topics, "w0")
    worker.start()
    traffic = Traffic(env, topics, ledger, "kafka-a", sizes.outage_rate_per_s, rng)
    traffic.start()
    await env.wait_handled(topics, sizes.kafka_messages // 2, timeout_s=120)
    await asyncio.sleep(3)
    await traffic.stop()  # the test's producer would only fail while the broker is away
    kafka = LocalStack(StackToolSettings()).services["kafka"]
    result.peak_rss_mb = env.rss.reset()
    await asyncio.to_thread(kafka.stop)
    await asyncio.sleep(5)
    before = await env.handled(topics) or 0
    await asyncio.to_thread(kafka.start)
    back = time.monotonic()
    traffic = Traffic(env, topics, ledger, "kafka-b", sizes.outage_rate_per_s, rng)
    traffic.start()
    await env.wait_handled(topics, before + 1, timeout_s=180, interval_s=0.1)
    resumed = time.monotonic() - back
    result.recovery_s = round(resumed, 1)
    await asyncio.sleep(10)
    await traffic.stop()
    await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    result.figures.update(handled_before_restart=before)
    return result


# -- 5. scale 1 -> 3 -> 1 ----------------------------------------------------------------------


async def scale_workers(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(5, "workers scaled 1 -> 3 -> 1 mid-run")
    topics = await env.new_topics("scale")
    ledger = Ledger()
    traffic = Traffic(env, topics, ledger, "scale", sizes.scale_rate_per_s, rng)
    traffic.start()
    first = env.worker(topics, "w1")
    first.start()
    await asyncio.sleep(10)
    extra = [env.worker(topics, f"w{n}") for n in (2, 3)]
    for w in extra:
        w.start()
    await asyncio.sleep(20)
    codes = [await w.terminate(90) for w in extra]
    result.check(codes == [0, 0], f"scaled-down workers exited {codes}")
    await asyncio.sleep(10)
    await traffic.stop()
    settled = await _finish(env, topics, ledger, result, [first], sizes.settle_timeout_s)
    result.recovery_s = round(settled, 1) if settled is not None else None
    result.figures.update(
        scale_down_exit_codes=codes,
        revocations=sum(w.log_count("partitions_revoked") for w in [first, *extra]),
    )
    return result


# -- 6. bad input ------------------------------------------------------------------------------

_MAX_RECORD_BYTES = 16 * 1024 * 1024


def _bad_values(rng: random.Random, i: int, huge: bool) -> bytes:
    now = datetime.now(UTC).isoformat()
    base = {
        "message_id": f"bad-{i:07d}",
        "group_id": "g",
        "sender_id": "u",
        "text": "hello",
        "sent_at": now,
    }
    if huge:
        return orjson.dumps({**base, "text": "x" * (10 * 1024 * 1024)})
    kind = i % 12
    if kind == 0:
        return b'{"message_id": "x", "text": ' + bytes(rng.randrange(32, 127) for _ in range(20))
    if kind == 1:
        return orjson.dumps({**base, "message_id": rng.randrange(10**6)})
    if kind == 2:
        doc = dict(base)
        del doc[rng.choice(["message_id", "group_id", "sender_id", "text", "sent_at"])]
        return orjson.dumps(doc)
    if kind == 3:
        return b'{"message_id": "\xff\xfe", "text": "\xc3\x28"}'
    if kind == 4:
        return orjson.dumps({**base, "text": "nul \u0000 byte"})
    if kind == 5:
        return b"[" * 5000 + b"]" * 5000
    if kind == 6:
        nested: object = "leaf"
        for _ in range(20):
            nested = {"n": nested}
        return orjson.dumps({**base, "metadata": nested})
    if kind == 7:
        return orjson.dumps({**base, "text": "\U0001f600" * 20_000})
    if kind == 8:
        return orjson.dumps({**base, "text": "\u200b\u200c\u200d\u2060" * 3000})
    if kind == 9:
        return orjson.dumps({**base, "sent_at": "yesterday-ish"})
    if kind == 10:
        return b""
    return orjson.dumps({**base, "text": "   "})


_TRICKS = (
    "\u202eevil reversed text\u202c looks fine",
    "hello\u200b\u200bworld with zero width",
    "\u200f\u0645\u0631\u062d\u0628\u0627\u200e mixed direction",
    "fa\u200bgg\u200dot",  # a slur split by zero-width characters: rules still block it
    "\U0001f600" * 500,
)


async def bad_input(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(6, "generated bad records mixed into good traffic")
    topics = await env.new_topics("bad", max_message_bytes=_MAX_RECORD_BYTES)
    ledger = Ledger()
    max_bytes = env.settings.kafka.max_message_bytes
    records: list[tuple[bytes, bytes, Outcome]] = []
    for i in range(sizes.bad_records):
        value = _bad_values(rng, i, huge=i < sizes.huge_records)
        outcome = expected_outcome(value, max_bytes)
        result.check(outcome.message_id is None, f"generated bad record {i} decodes as valid")
        records.append((b"g", value, outcome))
    split_slurs = 0
    for i in range(sizes.good_with_bad):
        text = _TRICKS[i % len(_TRICKS)] if i % 3 == 0 else None
        split_slurs += text == _TRICKS[3]
        records.append(good_record("good", i, rng, text))
    rng.shuffle(records)
    await env.produce(topics, ledger, records, max_request_bytes=_MAX_RECORD_BYTES)
    worker = env.worker(topics, "w0")
    started = time.monotonic()
    worker.start()
    settled = await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    result.recovery_s = None
    result.check(worker.returncode() == 0, "the worker went down")
    blocked = await _count_rule_hits(env, topics, "en.hate.slur")
    result.check(blocked == split_slurs, f"zero-width split slurs blocked {blocked}/{split_slurs}")
    stored = await env.stored_offsets(topics)
    ends = await end_offsets(env.bootstrap, topics.input_topic)
    stalled = [p for p, end in ends.items() if end and stored.get(p) != end]
    result.check(not stalled, f"partitions stalled: {stalled}")
    result.figures.update(
        bad_records=sizes.bad_records,
        good_records=sizes.good_with_bad,
        seconds_to_settle=round(settled, 1) if settled is not None else None,
        run_s=round(time.monotonic() - started, 1),
        stalled_partitions=stalled,
        zero_width_slurs_blocked=f"{blocked}/{split_slurs}",
    )
    return result


# -- 7. rule reload ----------------------------------------------------------------------------

_RULES_V2 = """
[[rules]]
id = "chaos.marker"
category = "spam"
severity = "high"
action = "block"
kind = "keywords"
languages = ["en"]
keywords = ["zorblax"]

[[rules]]
id = "chaos.redos"
category = "spam"
severity = "medium"
action = "block"
kind = "regex"
languages = ["en"]
patterns = ['''(a+)+$''']
"""

_RULES_BAD = """
[[rules]]
id = "chaos.backref"
category = "spam"
severity = "low"
action = "flag"
kind = "regex"
languages = ["en"]
patterns = ['''(ab)\\1''']
"""


async def _count_rule_hits(env: ChaosEnv, topics: Topics, rule_id: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(env.dsn)
    try:
        value = await conn.fetchval(
            "SELECT count(*) FROM verdicts WHERE source_topic = $1 AND decision = 'block' "
            "AND rule_hits @> $2::jsonb",
            topics.input_topic,
            orjson.dumps([{"rule_id": rule_id}]).decode(),
        )
    finally:
        await conn.close()
    return int(value)


async def _marker_decisions(env: ChaosEnv, topics: Topics, prefix: str) -> dict[str, int]:
    import asyncpg

    conn = await asyncpg.connect(env.dsn)
    try:
        rows = await conn.fetch(
            "SELECT decided_by, rule_hits::text AS hits FROM verdicts "
            "WHERE source_topic = $1 AND message_id LIKE $2",
            topics.input_topic,
            f"{prefix}-%",
        )
    finally:
        await conn.close()
    return {
        "rows": len(rows),
        "blocked_by_marker": sum(1 for r in rows if "chaos.marker" in r["hits"]),
    }


async def rules_reload(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(7, "rule file reloaded without a restart")
    topics = await env.new_topics("rules")
    ledger = Ledger()
    default = _read(project_root() / "pipelines/rulesets/default.toml")
    rules_path = env.run_dir / f"{topics.group_id}.rules.toml"
    _write(rules_path, default)
    worker = env.worker(
        topics,
        "w0",
        extra_env={
            "MODSTREAM_RULES__PATH": str(rules_path),
            "MODSTREAM_RULES__RELOAD_INTERVAL_S": "0.5",
        },
    )
    worker.start()
    n = sizes.rules_messages

    def marker(prefix: str) -> list[tuple[bytes, bytes, Outcome]]:
        return [good_record(prefix, i, rng, f"buy zorblax now {i}") for i in range(n)]

    async def phase(prefix: str) -> dict[str, int]:
        await env.produce(topics, ledger, marker(prefix))
        await env.wait_settled(topics, ledger, 120, [worker])
        return await _marker_decisions(env, topics, prefix)

    before = await phase("before")
    result.check(before["blocked_by_marker"] == 0, f"marker blocked before the reload: {before}")
    _write(rules_path, default + _RULES_V2)
    reloaded = await _wait_log(worker, "rules_reloaded", 1, 30)
    result.check(reloaded, "the worker did not log rules_reloaded")
    after = await phase("after")
    result.check(after["blocked_by_marker"] == n, f"new rule not applied to all: {after}")

    # Linear time: RE2 against the classic catastrophic-backtracking input.
    redos = compile_re2("(a+)+$")
    started = time.perf_counter()
    redos.search("a" * 50_000 + "!")
    redos_ms = (time.perf_counter() - started) * 1000.0
    result.check(redos_ms < 1000, f"(a+)+$ took {redos_ms:.0f} ms")
    evil = [good_record("redos", i, rng, "a" * 9_990 + "!") for i in range(5)]
    await env.produce(topics, ledger, evil)
    evil_started = time.monotonic()
    await env.wait_settled(topics, ledger, 60, [worker])
    evil_s = time.monotonic() - evil_started

    _write(rules_path, default + _RULES_V2 + _RULES_BAD)
    try:
        load_ruleset(rules_path)
        load_error = ""
    except RuleLoadError as exc:
        load_error = str(exc)
    result.check("chaos.backref" in load_error, f"bad rule file error unclear: {load_error!r}")
    rejected = await _wait_log(worker, "rules_reload_rejected", 1, 30)
    result.check(rejected, "the worker did not log rules_reload_rejected")
    kept = await phase("kept")
    result.check(kept["blocked_by_marker"] == n, f"old rules not kept after rejection: {kept}")
    result.check(worker.alive(), "worker died on a bad rule file")
    await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    result.figures.update(
        redos_50k_ms=round(redos_ms, 2),
        redos_pipeline_s=round(evil_s, 1),
        rejected_error=load_error[:120],
        marker_blocked=[
            before["blocked_by_marker"],
            after["blocked_by_marker"],
            kept["blocked_by_marker"],
        ],
    )
    return result


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


async def _wait_log(worker: WorkerProc, event: str, count: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.log_count(event) >= count:
            return True
        await asyncio.sleep(0.2)
    return False


# -- 8. SIGTERM while the broker (and PostgreSQL) are down ------------------------------------


async def sigterm_while_down(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(8, "SIGTERM while Kafka, then Kafka and PostgreSQL, are down")
    topics = await env.new_topics("sigterm")
    ledger = Ledger()
    services = LocalStack(StackToolSettings()).services
    drain = sizes.sigterm_drain_s
    bound = drain + 5.0
    exits: dict[str, dict[str, object]] = {}
    exit_times: list[float] = []
    configurations = [("kafka", ["kafka"]), ("kafka+postgres", ["kafka", "postgres"])]
    rounds = [
        (f"{label}#{n + 1}", down)
        for n in range(sizes.sigterm_rounds)
        for label, down in configurations
    ]
    for label, down in rounds:
        start = len(ledger)
        records = [good_record(f"term-{label}", i, rng) for i in range(sizes.sigterm_messages)]
        await env.produce(topics, ledger, records)
        worker = env.worker(
            topics,
            "w-" + label.replace("+", "-").replace("#", "-"),
            instance_id="chaos-sigterm",
            extra_env={"MODSTREAM_BATCH__DRAIN_TIMEOUT_S": str(drain)},
        )
        worker.start()
        await env.wait_handled(topics, start + len(records) // 4, timeout_s=120, interval_s=0.1)
        for name in down:
            await asyncio.to_thread(services[name].stop)
        signalled = time.monotonic()
        rc = await worker.terminate(timeout_s=bound + 60)
        took = round(time.monotonic() - signalled, 1)
        exits[label] = {"rc": rc, "exit_s": took}
        exit_times.append(took)
        result.check(rc is not None, f"{label}: worker needed SIGKILL after SIGTERM")
        result.check(took <= bound, f"{label}: exit took {took} s, bound {bound} s")
        for name in reversed(down):
            await asyncio.to_thread(services[name].start)
    last = env.worker(topics, "w-after", instance_id="chaos-sigterm")
    last.start()
    settled = await _finish(env, topics, ledger, result, [last], sizes.settle_timeout_s)
    result.recovery_s = round(settled, 1) if settled is not None else None
    slowest = max(exit_times, default=0.0)
    result.figures.update(
        exits=exits, slowest_exit_s=slowest, drain_timeout_s=drain, exit_bound_s=bound
    )
    return result


# -- 9. a batch whose Postgres write the driver refuses ----------------------------------------


async def client_side_pg_error(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(9, "Postgres write refused by the driver (client side)")
    topics = await env.new_topics("poison")
    ledger = Ledger()
    records: list[tuple[bytes, bytes, Outcome]] = []
    poisoned = 0
    for i in range(sizes.poison_messages):
        if i % sizes.poison_every == sizes.poison_every // 2:
            key, value, _ = good_record(POISON_PREFIX.rstrip("-"), i, rng)
            records.append((key, value, Outcome(None, "sink_rejected")))
            poisoned += 1
        else:
            records.append(good_record("clean", i, rng))
    await env.produce(topics, ledger, records)
    worker = env.worker(topics, "w0", module="tests.chaos.poisoned_worker")
    started = time.monotonic()
    worker.start()
    settled = await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    retried = worker.log_count("sink_unavailable")
    isolated = worker.log_count("sink_rejected_batch")
    result.check(retried == 0, f"a refused write was retried as an outage {retried} times")
    result.check(isolated > 0, "no batch was isolated: the poisoned rows never reached a write")
    result.recovery_s = round(settled, 1) if settled is not None else None
    result.figures.update(
        poisoned=poisoned,
        batches_isolated=isolated,
        outage_retries=retried,
        run_s=round(time.monotonic() - started, 1),
    )
    return result


# -- 10. a rule file that is not UTF-8 ---------------------------------------------------------


async def rules_not_utf8(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(10, "rule file with invalid UTF-8 rejected, old rules kept")
    topics = await env.new_topics("rules8")
    ledger = Ledger()
    rules = _read(project_root() / "pipelines/rulesets/default.toml") + _RULES_V2
    rules_path = env.run_dir / f"{topics.group_id}.rules.toml"
    _write(rules_path, rules)
    worker = env.worker(
        topics,
        "w0",
        extra_env={
            "MODSTREAM_RULES__PATH": str(rules_path),
            "MODSTREAM_RULES__RELOAD_INTERVAL_S": "0.5",
        },
    )
    worker.start()
    n = sizes.rules_messages

    async def phase(prefix: str) -> dict[str, int]:
        marked = [good_record(prefix, i, rng, f"buy zorblax now {i}") for i in range(n)]
        await env.produce(topics, ledger, marked)
        await env.wait_settled(topics, ledger, 120, [worker])
        return await _marker_decisions(env, topics, prefix)

    before = await phase("before")
    result.check(before["blocked_by_marker"] == n, f"marker rule not active at start: {before}")
    rules_path.write_bytes(rules.encode() + b"\n# caf\xe9 \xff\xfe not UTF-8\n")
    try:
        load_ruleset(rules_path)
        load_error = ""
    except RuleLoadError as exc:
        load_error = str(exc)
    result.check("UTF-8" in load_error, f"non-UTF-8 rule file error unclear: {load_error!r}")
    rejected = await _wait_log(worker, "rules_reload_rejected", 1, 30)
    result.check(rejected, "the worker did not log rules_reload_rejected")
    kept = await phase("kept")
    result.check(kept["blocked_by_marker"] == n, f"old rules not kept after rejection: {kept}")
    result.check(worker.alive(), "worker died on a rule file that is not UTF-8")
    await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    result.figures.update(
        rejected_error=load_error[:120],
        marker_blocked=[before["blocked_by_marker"], kept["blocked_by_marker"]],
        reloads_rejected=worker.log_count("rules_reload_rejected"),
    )
    return result


# -- 11. a dead letter larger than the producer's request limit --------------------------------


async def _dlq_records(env: ChaosEnv, topics: Topics) -> list[tuple[int, dict[str, bytes]]]:
    """(key + value bytes, headers) of every record on the DLQ topic."""
    from aiokafka import AIOKafkaConsumer

    ends = await end_offsets(env.bootstrap, topics.dlq_topic)
    consumer = AIOKafkaConsumer(
        topics.dlq_topic,
        bootstrap_servers=env.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=_MAX_RECORD_BYTES,
        fetch_max_bytes=_MAX_RECORD_BYTES,
    )
    await consumer.start()
    found: list[tuple[int, dict[str, bytes]]] = []
    positions: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            positions.get(p, 0) < end for p, end in ends.items()
        ):
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                for record in records:
                    size = len(record.key or b"") + len(record.value or b"")
                    found.append((size, dict(record.headers)))
                    positions[tp.partition] = record.offset + 1
    finally:
        await consumer.stop()
    return found


async def oversized_dead_letter(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(11, "dead letter whose key plus value exceed the producer's limit")
    topics = await env.new_topics("dlqsize", max_message_bytes=_MAX_RECORD_BYTES)
    ledger = Ledger()
    limit = env.settings.kafka.max_message_bytes
    records: list[tuple[bytes, bytes, Outcome]] = []
    for i in range(sizes.oversize_records):
        key = bytes([65 + i % 26]) * (limit // 2 + 200_000 * (i + 1))
        value = b'{"message_id": "oversize", "text": "' + b"x" * (limit - 150_000)
        outcome = expected_outcome(value, limit)
        result.check(outcome.message_id is None, f"oversized record {i} decodes as valid")
        records.append((key, value, outcome))
    records += [good_record("small", i, rng) for i in range(100)]
    rng.shuffle(records)
    await env.produce(topics, ledger, records, max_request_bytes=_MAX_RECORD_BYTES)
    worker = env.worker(topics, "w0")
    worker.start()
    settled = await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    dlq = await _dlq_records(env, topics)
    biggest = max((size for size, _ in dlq), default=0)
    result.check(len(dlq) == sizes.oversize_records, f"DLQ holds {len(dlq)} records")
    result.check(biggest <= limit, f"a DLQ record is {biggest} bytes, over {limit}")
    result.check(
        all(h.get("reason_code") and h.get("source_offset") for _, h in dlq),
        "a DLQ record lacks its reason or coordinates",
    )
    result.check(worker.log_count("dead_letter_retry") == 0, "a dead letter send was retried")
    result.recovery_s = round(settled, 1) if settled is not None else None
    result.figures.update(
        oversized=sizes.oversize_records,
        largest_source_record_bytes=max(len(k) + len(v) for k, v, _ in records),
        largest_dlq_record_bytes=biggest,
        key_dropped=sum(1 for _, h in dlq if h.get("key_dropped") == b"true"),
        truncated=sum(1 for _, h in dlq if h.get("truncated") == b"true"),
        metadata_only=sum(1 for _, h in dlq if h.get("metadata_only") == b"true"),
    )
    return result


# -- 12. a pending text the model refuses ------------------------------------------------------

_REJECT_MARKER = "fixture-reject-me"
"""The fixture model's test-only trigger (tests/fixtures/model_repository/moderation/1)."""


def _free_ports(count: int) -> tuple[int, ...]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return tuple(int(sock.getsockname()[1]) for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


async def _refused_rows(env: ChaosEnv, topics: Topics) -> dict[str, int]:
    import asyncpg

    conn = await asyncpg.connect(env.dsn)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM rescore_rejections WHERE source_topic = $1) AS refused,"
            " (SELECT count(*) FROM verdicts v JOIN rescore_rejections r USING "
            "   (source_topic, source_partition, source_offset) WHERE v.source_topic = $1 "
            "   AND v.decided_by = 'pending_model' AND v.message_id LIKE 'refuse-%') AS kept,"
            " (SELECT count(*) FROM pending_texts WHERE source_topic = $1) AS texts,"
            " (SELECT count(*) FROM verdicts WHERE source_topic = $1 "
            "   AND decided_by = 'model') AS by_model",
            topics.input_topic,
        )
    finally:
        await conn.close()
    assert row is not None
    return {k: int(row[k]) for k in ("refused", "kept", "texts", "by_model")}


async def model_refuses_text(env: ChaosEnv, sizes: Sizes, rng: random.Random) -> ScenarioResult:
    result = ScenarioResult(12, "a pending text the model refuses (INVALID_ARGUMENT)")
    topics = await env.new_topics("refuse")
    ledger = Ledger()
    every = max(1, sizes.rescore_messages // sizes.rejected_texts)
    records = [
        good_record("refuse", i, rng, f"hello {_REJECT_MARKER} {i}")
        if i % every == every // 2
        else good_record("plain", i, rng)
        for i in range(sizes.rescore_messages)
    ]
    refused = sum(1 for _, v, _ in records if _REJECT_MARKER.encode() in v)
    repository = project_root() / "tests/fixtures/model_repository"
    state = env.run_dir / f"{topics.group_id}.triton"
    http, grpc, metrics = _free_ports(3)
    with private_triton(repository, state, (http, grpc, metrics)) as server:
        await env.produce(topics, ledger, records)
        worker = env.worker(topics, "w0", extra_env={"MODSTREAM_TRITON__GRPC_URL": server.endpoint})
        worker.start()
        settled = await _finish(env, topics, ledger, result, [worker], sizes.settle_timeout_s)
    rows = await _refused_rows(env, topics)
    result.check(rows["refused"] == refused, f"{rows['refused']} of {refused} set aside")
    result.check(rows["kept"] == refused, f"rules-only verdicts kept: {rows['kept']}/{refused}")
    result.check(rows["texts"] == 0, f"{rows['texts']} pending texts left")
    result.check(worker.log_count("rescore_rejected") > 0, "no rescore_rejected logged")
    result.recovery_s = round(settled, 1) if settled is not None else None
    result.figures.update(
        refused_texts=refused,
        set_aside=rows["refused"],
        rescored_or_scored_by_model=rows["by_model"],
    )
    return result


Scenario = Callable[[ChaosEnv, Sizes, random.Random], Awaitable[ScenarioResult]]

SCENARIOS: dict[int, Scenario] = {
    1: kill_nine,
    2: triton_down,
    3: postgres_down,
    4: kafka_restart,
    5: scale_workers,
    6: bad_input,
    7: rules_reload,
    8: sigterm_while_down,
    9: client_side_pg_error,
    10: rules_not_utf8,
    11: oversized_dead_letter,
    12: model_refuses_text,
}
