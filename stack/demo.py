"""``modstream demo``: the whole pipeline on the local stack, from sample chat to a summary.

Starts the stack (idempotent), migrates, starts a worker process, produces a built-in sample
stream (English and Chinese; benign, abusive, spam and a few malformed records), waits until
every produced record has a verdict or a dead letter, and prints what happened and where to look.

``--secure`` runs the same over SASL_SSL: the broker also serves its SCRAM-SHA-512 listener
(``stack.kafka_secure``; a broker running without it is restarted with it), and the worker, the
producer and the offset look-ups all log in there with the stack's ``client.env`` credentials.

``--with-prometheus`` also runs Debian's Prometheus scraping the worker every second
(``stack.prometheus``, with the project's alert rules loaded) and, once every record is handled,
prints a few PromQL answers: the verdict rate, verdicts by decision, the consumer lag,
produce-to-verdict p99.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg

from admin.migrate import migrate
from common.settings import KafkaSettings
from engine.settings import HttpSettings
from review.settings import ReviewServiceSettings, ReviewSettings
from stack.kafka_secure import SecureListener, secure_kafka_settings
from stack.kafka_tools import end_offsets
from stack.prometheus import PrometheusServer, QueryError, Sample, query
from stack.samples import produce, sample_stream
from stack.settings import StackToolSettings
from worker.settings import WorkerSettings

__all__ = ["register"]

_SUMMARY_SQL = """
SELECT decision, decided_by, count(*) AS n, count(*) FILTER (WHERE escalated) AS escalated
FROM verdicts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset >= $3 AND source_offset < $4
GROUP BY 1, 2
"""
_DEAD_SQL = """
SELECT reason_code, count(*) AS n FROM dead_letters
WHERE source_topic = $1 AND source_partition = $2 AND source_offset >= $3 AND source_offset < $4
GROUP BY 1
"""
_MODEL_SQL = """
SELECT DISTINCT model_name, model_version FROM verdicts
WHERE source_topic = $1 AND source_partition = $2 AND source_offset >= $3 AND source_offset < $4
  AND model_name IS NOT NULL
"""


async def _handled(
    conn: asyncpg.Connection[Any], topic: str, ranges: dict[int, tuple[int, int]]
) -> int:
    total = 0
    for partition, (start, end) in ranges.items():
        if end <= start:
            continue
        total += int(
            await conn.fetchval(
                "SELECT (SELECT count(*) FROM verdicts WHERE source_topic = $1 AND "
                "source_partition = $2 AND source_offset >= $3 AND source_offset < $4) + "
                "(SELECT count(*) FROM dead_letters WHERE source_topic = $1 AND "
                "source_partition = $2 AND source_offset >= $3 AND source_offset < $4)",
                topic,
                partition,
                start,
                end,
            )
        )
    return total


def _probe(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (local URL)
            return bool(response.status == 200)
    except OSError:
        return False


async def _wait_ready(url: str, process: asyncio.subprocess.Process, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise SystemExit(f"the worker exited early (code {process.returncode}); see its log")
        if await asyncio.to_thread(_probe, url):
            return
        await asyncio.sleep(0.5)
    raise SystemExit(f"the worker did not become ready within {timeout_s:.0f}s")


async def _run_demo(
    settings: StackToolSettings,
    worker_http: HttpSettings,
    review: ReviewSettings,
    count: int,
    log_path: Path,
    *,
    secure: bool = False,
    with_prometheus: bool = False,
) -> int:
    from stack.local_stack import LocalStack

    if secure:
        stack = settings.stack.model_copy(update={"kafka_secure": True})
        settings = settings.model_copy(update={"stack": stack})
    print("1/5 starting the local stack (Kafka, PostgreSQL, Triton)...", flush=True)
    report = await asyncio.to_thread(LocalStack(settings).up)
    print(f"    started: {', '.join(report.started) or 'all were already running'}")
    kafka: KafkaSettings = settings.kafka
    worker_env = dict(os.environ)
    if secure:
        kafka = secure_kafka_settings(settings.stack, settings.kafka)
        worker_env.update(SecureListener(settings.stack).client_environment())
        print(
            f"    Kafka clients use SASL_SSL ({kafka.sasl_mechanism}) at {kafka.bootstrap_servers}"
        )
    print("2/5 applying migrations...", flush=True)
    applied = await migrate(settings)
    print(f"    applied: {applied or 'none needed'}")

    prometheus: PrometheusServer | None = None
    if with_prometheus:
        target = f"{worker_http.host}:{worker_http.port}"
        prometheus = PrometheusServer(settings.stack, [target])
        await asyncio.to_thread(prometheus.start)
        print(f"    Prometheus at {prometheus.url} scrapes the worker at {target} every second")
    print(f"3/5 starting the worker (log: {log_path})...", flush=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "modstream.cli",
            "worker",
            stdout=log,
            stderr=log,
            env=worker_env,
        )
    http = f"http://{worker_http.host}:{worker_http.port}"
    try:
        await _wait_ready(f"{http}/readyz", worker, 180.0)
        if prometheus is not None:
            # Counters scraped before the first record make rates start from zero.
            await _wait_scraped(prometheus.url)
        topic = settings.kafka.input_topic
        before = await end_offsets(kafka, topic)
        records = list(
            sample_stream(
                count,
                seed=int(time.time()),
                malformed_every=40,
                id_prefix=f"demo-{int(time.time())}",
            )
        )
        print(f"4/5 producing {len(records)} sample messages to {topic}...", flush=True)
        started = time.monotonic()
        await produce(kafka, topic, records)
        after = await end_offsets(kafka, topic)
        ranges = {p: (before.get(p, 0), end) for p, end in after.items()}
        expected = sum(end - start for start, end in ranges.values())
        conn = await asyncpg.connect(settings.postgres.dsn.get_secret_value())
        try:
            deadline = time.monotonic() + 300
            while (done := await _handled(conn, topic, ranges)) < expected:
                if worker.returncode is not None or time.monotonic() > deadline:
                    print(f"    only {done}/{expected} handled; see {log_path}")
                    return 1
                await asyncio.sleep(0.5)
            elapsed = time.monotonic() - started
            print(f"5/5 all {expected} records handled in {elapsed:.1f} s\n", flush=True)
            await _print_summary(conn, topic, ranges)
        finally:
            await conn.close()
        metrics = await asyncio.to_thread(_scrape, f"{http}/metrics")
        if prometheus is not None:
            metrics += "\n" + await _promql_summary(prometheus.url, expected)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(worker.wait(), 60)
        if prometheus is not None:
            await asyncio.to_thread(prometheus.stop)
    print(metrics)
    print(f"\nworker stopped cleanly (exit {code})." if code == 0 else f"\nworker exit {code}")
    _print_next_steps(settings, review, http)
    return 0 if code == 0 else 1


async def _print_summary(
    conn: asyncpg.Connection[Any], topic: str, ranges: dict[int, tuple[int, int]]
) -> None:
    by_decision: dict[tuple[str, str], list[int]] = {}
    dead: dict[str, int] = {}
    models: set[tuple[str, str]] = set()
    for partition, (start, end) in ranges.items():
        args = (topic, partition, start, end)
        for row in await conn.fetch(_SUMMARY_SQL, *args):
            slot = by_decision.setdefault((row["decision"], row["decided_by"]), [0, 0])
            slot[0] += row["n"]
            slot[1] += row["escalated"]
        for row in await conn.fetch(_DEAD_SQL, *args):
            dead[row["reason_code"]] = dead.get(row["reason_code"], 0) + row["n"]
        for row in await conn.fetch(_MODEL_SQL, *args):
            models.add((row["model_name"], row["model_version"]))
    print("verdicts by decision and stage:")
    print(f"    {'decision':<8} {'decided_by':<14} {'count':>6} {'escalated':>10}")
    for (decision, decided_by), (n, esc) in sorted(by_decision.items()):
        print(f"    {decision:<8} {decided_by:<14} {n:>6} {esc:>10}")
    total_esc = sum(v[1] for v in by_decision.values())
    print(f"escalations sent to human review: {total_esc}")
    print(f"dead letters: {sum(dead.values())} " + str(dict(sorted(dead.items()))))
    print("models used: " + (", ".join(f"{n} v{v}" for n, v in sorted(models)) or "none"))


_PROMQL = (
    (
        "verdicts per second (peak 15 s window)",
        "max_over_time(sum(rate(modstream_verdicts_total[15s]))[5m:1s])",
    ),
    ("verdicts by decision", "sum by (decision) (modstream_verdicts_total) > 0"),
    ("consumer lag (records, all partitions)", "sum(modstream_consumer_lag_records)"),
    ("recorded lag per topic", "modstream:consumer_lag_records:sum"),
    (
        "produce-to-verdict p99 (s), last 60 s",
        "histogram_quantile(0.99, sum by (le) "
        "(rate(modstream_produce_to_verdict_seconds_bucket[60s])))",
    ),
    ("scrapes of the worker in the last 5 min that succeeded", "sum_over_time(up[5m])"),
    ("scrapes of the worker in the last 5 min", "count_over_time(up[5m])"),
)
"""Title and PromQL of each answer the demo prints. The rate's window spans many scrapes, so a
busy worker that misses a scrape or two (the scrape timeout is the 1 s interval) still has two
samples in every window."""


def _sample_text(labels: Mapping[str, str], value: float) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
    return f"{shown} {value:.4g}" if shown else f"{value:.4g}"


async def _wait_scraped(url: str, timeout_s: float = 30.0) -> None:
    """Until Prometheus has scraped the worker once (``up`` is 1)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(QueryError):
            if any(s.value == 1 for s in await asyncio.to_thread(query, url, "up")):
                return
        await asyncio.sleep(0.5)
    print(f"    Prometheus has not scraped the worker within {timeout_s:.0f} s; going on")


async def _answers(url: str) -> list[tuple[str, str, list[Sample] | QueryError]]:
    answers: list[tuple[str, str, list[Sample] | QueryError]] = []
    for title, promql in _PROMQL:
        try:
            answers.append((title, promql, await asyncio.to_thread(query, url, promql)))
        except QueryError as exc:
            answers.append((title, promql, exc))
    return answers


async def _promql_summary(url: str, expected: int, timeout_s: float = 30.0) -> str:
    """Once Prometheus has scraped every verdict and a lag figure, and every query has an answer
    (a recording rule is evaluated a moment after the scrape it reads), those answers."""
    wanted = (
        "(sum(modstream_verdicts_total) or vector(0))"
        f" + (sum(modstream_dead_letters_total) or vector(0)) >= {expected}"
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            caught_up = await asyncio.to_thread(query, url, wanted)
            # The worker measures its lag every few seconds: wait for a figure taken after the
            # last record was handled (the demo produces nothing else).
            lag = await asyncio.to_thread(query, url, "sum(modstream_consumer_lag_records) == 0")
        except QueryError as exc:
            return f"Prometheus queries failed: {exc}"
        answers = await _answers(url)
        complete = all(isinstance(a, list) and a for _, _, a in answers)
        if (caught_up and lag and complete) or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    lines = [f"\nPromQL at {url} (the worker scraped every second):"]
    for title, promql, answer in answers:
        if isinstance(answer, QueryError):
            lines.append(f"    {title}: error {answer}")
        else:
            shown = ", ".join(_sample_text(s.labels, s.value) for s in answer)
            lines.append(f"    {title}: {shown or 'no data'}")
        lines.append(f"        {promql}")
    return "\n".join(lines)


def _scrape(url: str) -> str:
    wanted = ("modstream_verdicts_total", "modstream_dead_letters_total", "modstream_batches_total")
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (local URL)
            text = response.read().decode()
    except OSError:
        return "(metrics unavailable)"
    lines = [ln for ln in text.splitlines() if ln.startswith(wanted) and not ln.endswith(" 0.0")]
    return "\nworker metrics (excerpt):\n    " + "\n    ".join(lines)


def _print_next_steps(settings: StackToolSettings, review: ReviewSettings, http: str) -> None:
    port = settings.stack.postgres_port
    query = "SELECT decision, decided_by, category, count(*) FROM verdicts GROUP BY 1, 2, 3"
    print(
        "\nwhere to look next:\n"
        f'    psql -h 127.0.0.1 -p {port} -U modstream modstream -c "{query}"\n'
        f"    modstream worker   # then: curl {http}/metrics\n"
        "    modstream review add-user alice --role moderator && modstream review serve\n"
        f"        # then open http://{review.host}:{review.port}/console\n"
        "    modstream stack down   # stop everything the stack started"
    )


def _run(args: argparse.Namespace) -> int:
    settings = StackToolSettings()
    # The demo drives the worker and points at the console: it reads their sections too.
    worker_http = WorkerSettings().http
    review = ReviewServiceSettings().review
    log_path = settings.stack.state_dir / "worker" / "demo-worker.log"
    return asyncio.run(
        _run_demo(
            settings,
            worker_http,
            review,
            args.messages,
            log_path,
            secure=args.secure,
            with_prometheus=args.with_prometheus,
        )
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the pipeline end to end on the local stack with sample chat"
    )
    parser.add_argument("--messages", type=int, default=1000, help="sample messages to produce")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="serve and use the broker's SASL_SSL listener (SCRAM-SHA-512, throw-away CA)",
    )
    parser.add_argument(
        "--with-prometheus",
        action="store_true",
        help="also run Debian's Prometheus scraping the worker, and print PromQL results",
    )
    parser.set_defaults(handler=_run)
