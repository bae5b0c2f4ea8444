"""``modstream rescan`` against the real Kafka, PostgreSQL and Triton (fixture versions 1 and 2).

A live worker decides the topic with version 1 of the fixture model; the rescan reads the same
records back from Kafka and decides them with version 2. The two versions differ by one cue word
each (``dumb``: version 2 only, ``scum``: version 1 only), so exactly those messages change, in
``offensive``: ``dumb`` ones become harsher, ``scum`` ones softer. The command runs in its own
process, as an operator runs it, and is killed once mid-way to prove a resumed rescan applies
every change exactly once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import subprocess
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from engine.parts import build_parts
from stack.samples import SampleRecord, produce
from tests.integration.conftest import PARTITIONS, free_ports, wait_until
from tests.integration.sql_support import documented_query, fetch_as_analyst, fetch_rows
from tests.support import run_command
from worker.app import Worker
from worker.parts import build_stream_parts
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_DUMB = 12
_SCUM = 9
_SAME = 30
_SAME_TEXTS = ("good game everyone {i}", "you idiot {i}", "buy cheap followers, click {i}")
_GROUPS = 3


def _message_id(i: int) -> str:
    return f"rescan-{i:03d}"


def _records() -> list[SampleRecord]:
    texts = [f"you are so dumb {i}" for i in range(_DUMB)]
    texts += [f"what scum you are {i}" for i in range(_SCUM)]
    texts += [_SAME_TEXTS[i % len(_SAME_TEXTS)].format(i=i) for i in range(_SAME)]
    start = datetime.now(UTC)
    records = []
    for i, text in enumerate(texts):
        document = {
            "message_id": _message_id(i),
            "group_id": f"g-{i % _GROUPS}",
            "sender_id": f"u-{i % 7}",
            "text": text,
            "sent_at": (start + timedelta(milliseconds=i)).isoformat(),
        }
        records.append(
            SampleRecord(document["group_id"].encode(), orjson.dumps(document), _message_id(i), "x")
        )
    return records


_DUMB_IDS = [_message_id(i) for i in range(_DUMB)]
_SCUM_IDS = [_message_id(i) for i in range(_DUMB, _DUMB + _SCUM)]
_CHANGED = set(_DUMB_IDS) | set(_SCUM_IDS)


async def _moderate_with_version_1(settings: WorkerSettings, expected: int) -> None:
    """A live worker deciding the topic with version 1, until every record has a verdict."""
    live = settings.model_copy(
        update={"triton": settings.triton.model_copy(update={"model_version": "1"})}
    )
    parts = build_stream_parts(
        live, moderation=build_parts(live, consumer_group=live.kafka.group_id)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(live, parts).run(stop))
    dsn = live.postgres.dsn.get_secret_value()

    async def done() -> bool:
        if task.done():
            task.result()
        rows = await fetch_rows(
            dsn,
            "SELECT count(*) AS n FROM verdicts WHERE source_topic = $1 AND published",
            live.kafka.input_topic,
        )
        return int(rows[0]["n"]) >= expected

    await wait_until(done, timeout_s=120)
    stop.set()
    await asyncio.wait_for(task, timeout=60)


async def _rescan(
    settings: WorkerSettings,
    *args: str,
    failpoint: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``modstream rescan ARGS`` in a process of its own (settings from its environment, plus
    ``env``)."""
    env = {
        "MODSTREAM_KAFKA__INPUT_TOPIC": settings.kafka.input_topic,
        "MODSTREAM_FAILPOINT": failpoint,
        **(env or {}),
    }
    return await run_command(settings, "rescan", *args, env=env, timeout_s=180)


def _rescan_id(out: str) -> uuid.UUID:
    match = re.search(r"^rescan_id=([0-9a-f-]{36})$", out, flags=re.MULTILINE)
    assert match is not None, out
    return uuid.UUID(match[1])


def _final(out: str) -> dict[str, str]:
    """The command's last line, ``rescan_id=… finished=true apply=… changed=N …``, as a dict."""
    last = out.strip().splitlines()[-1]
    return dict(field.split("=", 1) for field in last.split())


async def _report(dsn: str, rescan_id: uuid.UUID) -> dict[str, Any]:
    rows = await fetch_rows(
        dsn, "SELECT report::text AS r, finished_at FROM rescans WHERE rescan_id = $1", rescan_id
    )
    assert len(rows) == 1
    report: dict[str, Any] = orjson.loads(rows[0]["r"])
    report["finished"] = rows[0]["finished_at"] is not None
    return report


async def _verdicts(dsn: str, topic: str) -> dict[str, asyncpg.Record]:
    rows = await fetch_rows(
        dsn,
        "SELECT message_id, decision, escalated, category, model_version, rescan_id, "
        "rescanned_at, published FROM verdicts WHERE source_topic = $1",
        topic,
    )
    return {r["message_id"]: r for r in rows}


async def _read_topic(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Everything on ``topic`` (created with the suite's partition count) now."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        out: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            positions = [await consumer.position(tp) for tp in partitions]
            if all(pos >= ends[tp] for pos, tp in zip(positions, partitions, strict=True)):
                break
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(orjson.loads(r.value) for r in records)
        return out
    finally:
        await consumer.stop()


async def _decided_history(s: WorkerSettings) -> tuple[list[SampleRecord], list[str]]:
    """The records produced to the input topic and decided by version 1; the ``--since`` /
    ``--until`` arguments of a window holding all of them."""
    records = _records()
    before = datetime.now(UTC) - timedelta(seconds=1)
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    await _moderate_with_version_1(s, len(records))
    after = datetime.now(UTC) + timedelta(seconds=1)
    return records, ["--since", before.isoformat(), "--until", after.isoformat()]


async def test_rescan_reports_then_applies_each_change_once_across_a_crash(
    worker_settings: WorkerSettings,
) -> None:
    """A dry run reports the flips by category and direction and changes nothing; ``--group``
    keeps one group; ``--apply`` killed after its second batch and then resumed stamps every
    verdict it read with its id and model (changed or not) exactly once, changes the changed
    ones, opens the new review items once and publishes only the changed verdicts."""
    s = worker_settings
    topic = s.kafka.input_topic
    dsn = s.postgres.dsn.get_secret_value()
    records, window = await _decided_history(s)
    live = await _verdicts(dsn, topic)
    assert all(live[m]["decision"] == "allow" for m in _DUMB_IDS)  # version 1: not "dumb"
    assert all(live[m]["decision"] != "allow" for m in _SCUM_IDS)  # ... but "scum"
    items_before = await fetch_rows(
        dsn, "SELECT message_id FROM review_items WHERE source_topic = $1", topic
    )

    dry = await _rescan(s, *window, "--model", "moderation:2")
    assert dry.returncode == 0, dry.stderr
    dry_id = _rescan_id(dry.stdout)
    final = _final(dry.stdout)
    assert final["apply"] == "false"
    assert int(final["changed"]) == len(_CHANGED)
    assert int(final["applied"]) == 0
    report = await _report(dsn, dry_id)
    assert report["finished"]
    assert report["read"] == report["window"] == len(records)
    assert report["compared"] == len(records)
    assert report["unchanged"] == len(records) - len(_CHANGED)
    assert set(report["changes"]) == {"offensive"}
    harsher = sum(n for d, n in report["changes"]["offensive"].items() if d.startswith("allow"))
    softer = sum(n for d, n in report["changes"]["offensive"].items() if not d.startswith("allow"))
    assert (harsher, softer) == (_DUMB, _SCUM)
    examples = {m for ids in report["examples"]["offensive"].values() for m in ids}
    assert examples
    assert examples <= _CHANGED
    assert "offensive" in dry.stdout
    assert await _verdicts(dsn, topic) == live  # a dry run changes nothing
    # Not a terminal: JSON progress lines on stderr.
    progress = [
        orjson.loads(line) for line in dry.stderr.splitlines() if '"rescan_progress"' in line
    ]
    assert progress
    assert progress[-1]["read"] == len(records)

    grouped = await _rescan(s, *window, "--model", "moderation:2", "--group", "g-0")
    assert grouped.returncode == 0, grouped.stderr
    g_report = await _report(dsn, _rescan_id(grouped.stdout))
    in_group = [i for i in range(len(records)) if i % _GROUPS == 0]
    assert g_report["other_groups"] == len(records) - len(in_group)
    assert g_report["compared"] == len(in_group)
    assert g_report["changed"] == len({_message_id(i) for i in in_group} & _CHANGED)

    # --apply, killed right after its second batch committed (before publishing it).
    args = (*window, "--model", "moderation:2", "--apply", "--batch", "8")
    killed = await _rescan(s, *args, failpoint="kill:rescan_after_commit@2")
    assert killed.returncode == -9, killed.stderr
    rescan_id = _rescan_id(killed.stdout)
    partial = await _verdicts(dsn, topic)
    stamped_before = {m for m, r in partial.items() if r["rescan_id"] == rescan_id}
    assert stamped_before
    assert stamped_before < set(live)
    assert not (await _report(dsn, rescan_id))["finished"]

    resumed = await _rescan(s, "--resume", str(rescan_id))
    assert resumed.returncode == 0, resumed.stderr
    assert _rescan_id(resumed.stdout) == rescan_id
    final = _final(resumed.stdout)
    assert final["apply"] == "true"
    after = await _verdicts(dsn, topic)
    stamped = {m for m, r in after.items() if r["rescan_id"] == rescan_id}
    assert stamped == set(live)  # every verdict read, changed or not
    report = await _report(dsn, rescan_id)
    assert report["finished"]
    # Counted once over both runs: nothing applied (or read) twice.
    assert report["applied"] == int(final["applied"]) == len(_CHANGED)
    assert report["stamped"] == len(records)
    assert report["changed"] == len(_CHANGED)
    assert report["kept"] == 0  # no moderator decided any of these
    assert report["read"] == report["compared"] == len(records)
    for row in after.values():
        assert row["model_version"] == "2"
        assert row["rescanned_at"] is not None
    assert all(after[m]["category"] == "offensive" for m in _DUMB_IDS)
    assert all(after[m]["category"] is None for m in _SCUM_IDS)  # allowed: no category
    assert all(after[m]["decision"] != "allow" for m in _DUMB_IDS)
    assert all(after[m]["decision"] == "allow" for m in _SCUM_IDS)
    decision = ("decision", "escalated", "category", "published")
    for m, row in after.items():
        if m not in _CHANGED:
            assert [row[k] for k in decision] == [live[m][k] for k in decision]
    # Each changed verdict is published (the killed batch's by the resumed run's relay).
    assert all(after[m]["published"] for m in _CHANGED)
    published = await _read_topic(s.kafka.bootstrap_servers, s.kafka.verdict_topic)
    republished = {v["message_id"] for v in published if v.get("model_version") == "2"}
    assert republished == _CHANGED
    # Review items: the "dumb" escalations are new, each once; the old ones are kept.
    items = await fetch_rows(
        dsn, "SELECT message_id FROM review_items WHERE source_topic = $1", topic
    )
    ids = [r["message_id"] for r in items]
    assert len(ids) == len(set(ids))
    escalated_now = {m for m in _DUMB_IDS if after[m]["escalated"]}
    assert escalated_now <= set(ids)
    assert {r["message_id"] for r in items_before} <= set(ids)

    # Analysts: the documented query shows this rescan's changes, the verdicts their provenance.
    documented = await fetch_as_analyst(dsn, documented_query("Rescans (history decided again)"))
    mine = [r for r in documented if r["rescan_id"] == rescan_id]
    assert sum(r["messages"] for r in mine) == len(_CHANGED)
    assert {r["category"] for r in mine} == {"offensive"}
    provenance = await fetch_as_analyst(
        dsn,
        "SELECT count(*) AS n FROM analytics_verdicts WHERE rescan_id = $1 "
        "AND rescanned_at IS NOT NULL AND model_version = '2'",
        rescan_id,
    )
    assert provenance[0]["n"] == len(records)

    # A finished rescan resumed again does nothing more.
    again = await _rescan(s, "--resume", str(rescan_id))
    assert again.returncode == 0, again.stderr
    assert await _verdicts(dsn, topic) == after


async def test_records_gone_from_the_topic_are_counted_as_expired(
    worker_settings: WorkerSettings,
) -> None:
    """Verdicts whose records the topic no longer holds (deleted below a new log start) are
    reported as ``expired``; the records still held are compared as usual."""
    s = worker_settings
    topic = s.kafka.input_topic
    dsn = s.postgres.dsn.get_secret_value()
    records, window = await _decided_history(s)
    per_partition = await fetch_rows(
        dsn,
        "SELECT source_partition AS p, count(*) AS n FROM verdicts WHERE source_topic = $1 "
        "GROUP BY 1 ORDER BY 2 DESC",
        topic,
    )
    partition, held = int(per_partition[0]["p"]), int(per_partition[0]["n"])
    removed = held // 2
    admin = AIOKafkaAdminClient(bootstrap_servers=s.kafka.bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, partition): RecordsToDelete(removed)})
    finally:
        await admin.close()

    result = await _rescan(s, *window, "--model", "moderation:2")
    assert result.returncode == 0, result.stderr
    final = _final(result.stdout)
    assert int(final["expired"]) == removed
    report = await _report(dsn, _rescan_id(result.stdout))
    assert report["expired"] == removed
    assert report["read"] == len(records) - removed
    assert report["compared"] + report["expired"] == len(records)


def _decided_records() -> list[SampleRecord]:
    """Four "scum" messages (version 1 escalates them, version 2 allows them), four "dumb" ones
    (the other way round) and two harmless ones each from a sender whose strikes came before
    (``s-early``) or after (``s-late``) they were sent."""
    start = datetime.now(UTC)
    texts = [("s-scum", f"what scum you are {i}") for i in range(4)]
    texts += [("s-dumb", f"you are so dumb {i}") for i in range(4)]
    texts += [
        (sender, f"good game everyone {i}") for sender in ("s-early", "s-late") for i in (0, 1)
    ]
    records = []
    for i, (sender, text) in enumerate(texts):
        document = {
            "message_id": f"decided-{i:02d}",
            "group_id": "g-0",
            "sender_id": sender,
            "text": text,
            "sent_at": (start + timedelta(milliseconds=i)).isoformat(),
        }
        records.append(SampleRecord(b"g-0", orjson.dumps(document), document["message_id"], "x"))
    return records


async def _items(dsn: str, topic: str) -> dict[str, asyncpg.Record]:
    rows = await fetch_rows(
        dsn,
        "SELECT id, message_id, status, resolution, claimed_by, closed_at FROM review_items "
        "WHERE source_topic = $1",
        topic,
    )
    return {r["message_id"]: r for r in rows}


async def test_a_moderators_decision_stands_and_review_items_follow_the_rescan(
    worker_settings: WorkerSettings,
) -> None:
    """An applied rescan never changes a verdict a moderator resolved or holds a claim on: it
    records what version 2 would say beside it and counts it as kept; the open items of verdicts
    it no longer escalates are closed with a system event, new escalations get items, and the
    sender's strikes are those of when the message was sent (a strike given later does not
    escalate an old message; one given before does)."""
    # A wide grey zone, so that what either version finds offensive goes to a person.
    s = worker_settings.model_copy(
        update={"policy": dataclasses.replace(worker_settings.policy, escalate_high=0.999)}
    )
    topic = s.kafka.input_topic
    dsn = s.postgres.dsn.get_secret_value()
    records = _decided_records()
    before = datetime.now(UTC) - timedelta(seconds=1)
    await produce(s.kafka.bootstrap_servers, topic, records)
    await _moderate_with_version_1(s, len(records))
    window = [
        "--since",
        before.isoformat(),
        "--until",
        (datetime.now(UTC) + timedelta(seconds=1)).isoformat(),
    ]
    live = await _verdicts(dsn, topic)
    scum = [f"decided-{i:02d}" for i in range(4)]
    dumb = [f"decided-{i:02d}" for i in range(4, 8)]
    early = [f"decided-{i:02d}" for i in (8, 9)]
    late = [f"decided-{i:02d}" for i in (10, 11)]
    items = await _items(dsn, topic)
    assert all(live[m]["escalated"] for m in scum)  # version 1 escalates "scum"
    assert set(items) == set(scum)
    assert not any(live[m]["escalated"] for m in dumb + early + late)
    resolved, claimed, *waiting = scum

    conn = await asyncpg.connect(dsn)
    try:
        # A moderator banned one, another holds a live claim on the next; two stay open.
        await conn.execute(
            "UPDATE review_items SET status = 'resolved', resolution = 'ban', "
            "resolved_by = 'mod-1', resolved_at = now() WHERE id = $1",
            items[resolved]["id"],
        )
        await conn.execute(
            "UPDATE review_items SET status = 'claimed', claimed_by = 'mod-2', claimed_at = now(), "
            "claim_expires_at = now() + interval '1 hour' WHERE id = $1",
            items[claimed]["id"],
        )
        # Three strikes each: s-early's given a day before its messages, s-late's after them.
        sent = {m["message_id"]: datetime.fromisoformat(m["sent_at"]) for m in map(_doc, records)}
        for sender, created in (
            ("s-early", sent[early[0]] - timedelta(days=1)),
            ("s-late", datetime.now(UTC)),
        ):
            for _ in range(3):
                await conn.execute(
                    "INSERT INTO sender_strikes (sender_id, group_id, review_item_id, action, "
                    "weight, created_at, expires_at) VALUES ($1, 'g-0', $2, 'ban', 1, $3, $4)",
                    sender,
                    items[resolved]["id"],
                    created,
                    created + timedelta(days=30),
                )
    finally:
        await conn.close()
    # One record a second, so the kept counter can be scraped while the rescan runs.
    (port,) = free_ports(1)
    running = asyncio.create_task(
        _rescan(
            s,
            *window,
            "--model",
            "moderation:2",
            "--apply",
            "--batch",
            "1",
            "--rate",
            "1",
            "--metrics-port",
            str(port),
            env={"MODSTREAM_POLICY__ESCALATE_HIGH": "0.999"},
        )
    )
    kept: list[float] = []

    async def counted() -> bool:
        if running.done():
            return True
        kept[:] = [await asyncio.to_thread(_kept_total, port)]
        return kept[0] == 2

    await wait_until(counted, timeout_s=60)
    assert kept == [2]  # scraped while running, not read after
    done = await running
    assert done.returncode == 0, done.stderr
    assert _final(done.stdout)["kept"] == "2"
    rescan_id = _rescan_id(done.stdout)
    report = await _report(dsn, rescan_id)
    assert (report["kept"], report["kept_differs"]) == (2, 2)
    assert report["closed"] == len(waiting)
    assert report["stamped"] == len(records) - 2

    rows = await fetch_rows(
        dsn,
        "SELECT message_id, decision, escalated, model_version, scores::text AS scores, "
        "rescan_id, rescan_decision, rescan_escalated, rescan_model_version, "
        "rescan_scores::text AS rescan_scores FROM verdicts WHERE source_topic = $1",
        topic,
    )
    after = {r["message_id"]: r for r in rows}
    for m in (resolved, claimed):  # as decided, version 2's answer beside it
        row = after[m]
        assert (row["decision"], row["escalated"]) == (live[m]["decision"], True)
        assert row["model_version"] == "1"
        assert row["rescan_id"] == rescan_id
        assert (row["rescan_decision"], row["rescan_escalated"]) == ("allow", False)
        assert row["rescan_model_version"] == "2"
        assert row["rescan_scores"] is not None
        assert row["rescan_scores"] != row["scores"]
    for m in waiting:
        assert (after[m]["decision"], after[m]["escalated"]) == ("allow", False)
        assert after[m]["model_version"] == "2"
        assert after[m]["rescan_decision"] is None
    for m in late:  # today's strikes do not reach back
        assert not after[m]["escalated"]
    for m in early:  # the strikes the sender had then do
        assert after[m]["escalated"]

    items = await _items(dsn, topic)
    assert (items[resolved]["status"], items[resolved]["resolution"]) == ("resolved", "ban")
    assert (items[claimed]["status"], items[claimed]["claimed_by"]) == ("claimed", "mod-2")
    for m in waiting:
        assert items[m]["status"] == "closed"
        assert items[m]["closed_at"] is not None
    escalated_now = {m for m, r in after.items() if r["escalated"] and r["rescan_decision"] is None}
    assert escalated_now >= set(early)
    assert {m for m, r in items.items() if r["status"] == "open"} == escalated_now
    assert report["opened"] == len(escalated_now)
    events = await fetch_rows(
        dsn,
        "SELECT review_item_id, actor, action, details->>'rescan_id' AS rescan, "
        "details->>'role' AS role FROM review_events ORDER BY id",
    )
    closing = [e for e in events if e["action"] == "close"]
    assert {e["review_item_id"] for e in closing} == {items[m]["id"] for m in waiting}
    assert all(
        (e["actor"], e["role"], e["rescan"]) == ("rescan", "system", str(rescan_id))
        for e in closing
    )
    # The moderator's decisions are not contradicted on the verdict topic.
    published = await _read_topic(s.kafka.bootstrap_servers, s.kafka.verdict_topic)
    republished = {v["message_id"] for v in published if v.get("model_version") == "2"}
    assert not republished & {resolved, claimed}
    assert set(waiting) <= republished
    # Analysts read the would-be verdict beside the decided one.
    beside = await fetch_as_analyst(
        dsn,
        "SELECT count(*) AS n FROM analytics_verdicts WHERE rescan_id = $1 "
        "AND rescan_model_version = '2' AND rescan_decision IS DISTINCT FROM decision",
        rescan_id,
    )
    assert beside[0]["n"] == 2
    # The documented query: version 2 would have disagreed with the ban, version 1 agreed.
    documented = await fetch_as_analyst(
        dsn, documented_query("A person's decision beside the rescan")
    )
    assert [
        (
            r["rescan_model_version"],
            r["category"],
            r["decided"],
            r["rescan_agreed"],
            r["live_agreed"],
        )
        for r in documented
    ] == [("2", "offensive", 1, 0, 1)]


def _kept_total(port: int) -> float:
    """``modstream_rescan_kept_total{would="different"}`` from a running rescan's /metrics
    (-1 while it does not answer yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return -1.0
    for line in text.splitlines():
        if line.startswith('modstream_rescan_kept_total{would="different"}'):
            return float(line.split()[-1])
    return -1.0


def _doc(record: SampleRecord) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(record.value)
    return document
