"""Shadow scoring against the real Kafka, PostgreSQL and Triton (fixture versions 1 and 2).

The same records are moderated three times, each run by its own worker into its own database:
without a shadow, with version 1 of the fixture model as the shadow of the live version 2, and
with a shadow model that is not served at all. The live verdicts must not differ by one byte;
the shadow rows and the analysts' views must show exactly the flips the two versions' one
differing cue word each predicts (``dumb``: version 2 only, ``scum``: version 1 only).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson
import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from engine.metrics import SHADOW_DROP_REASONS, Metrics
from engine.parts import build_parts
from stack.samples import SampleRecord, produce
from tests.integration.conftest import wait_until
from tests.integration.online_support import (
    Client,
    make_token,
    online_settings_for,
    request,
    running_service,
)
from tests.integration.sql_support import documented_query, fetch_as_analyst, fetch_rows
from tests.support import temporary_database
from worker.app import Worker
from worker.parts import build_stream_parts
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_DUMB = 12
_SCUM = 9
_SAME = 30
"""Messages both versions decide alike: chat, insults both know, spam."""
_SAME_TEXTS = ("good game everyone {i}", "you idiot {i}", "buy cheap followers, click {i}")

_LIVE_COLUMNS = (
    "source_topic, source_partition, source_offset, sent_at, message_id, group_id, sender_id, "
    "text_sha256, decision, decided_by, escalated, category, priority, reasons, rule_hits, "
    "scores, sentiment_label, intent_label, toxicity_label, model_name, model_version"
)
"""Everything a verdict says about its message (not its batch id or timings, which differ run
to run whatever the shadow does)."""


def _records() -> list[SampleRecord]:
    texts = [f"you are so dumb {i}" for i in range(_DUMB)]
    texts += [f"what scum you are {i}" for i in range(_SCUM)]
    texts += [_SAME_TEXTS[i % len(_SAME_TEXTS)].format(i=i) for i in range(_SAME)]
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    records = []
    for i, text in enumerate(texts):
        document = {
            "message_id": f"shadow-{i:03d}",
            "group_id": f"g-{i % 3}",
            "sender_id": f"u-{i % 7}",
            "text": text,
            "sent_at": (start + timedelta(seconds=i)).isoformat(),
        }
        records.append(
            SampleRecord(f"g-{i % 3}".encode(), orjson.dumps(document), document["message_id"], "x")
        )
    return records


async def _moderate(settings: WorkerSettings, expected: int) -> Metrics:
    """Run a worker over the topic until every record has a verdict (and the shadow, if any,
    has had its chance), then stop it; its metrics."""
    metrics = Metrics(CollectorRegistry())
    parts = build_stream_parts(
        settings,
        moderation=build_parts(settings, consumer_group=settings.kafka.group_id, metrics=metrics),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(settings, parts).run(stop))
    dsn = settings.postgres.dsn.get_secret_value()

    def shadow_settled() -> bool:
        dropped = sum(_counter(metrics, reason) for reason in SHADOW_DROP_REASONS)
        return _scored(metrics) + dropped >= expected

    async def done() -> bool:
        if task.done():
            task.result()
        conn = await asyncpg.connect(dsn)
        try:
            count = await conn.fetchval(
                "SELECT count(*) FROM verdicts WHERE source_topic = $1", settings.kafka.input_topic
            )
        finally:
            await conn.close()
        return int(count) >= expected and (parts.moderation.shadow is None or shadow_settled())

    await wait_until(done, timeout_s=120)
    stop.set()
    await asyncio.wait_for(task, timeout=60)
    return metrics


async def _live_bytes(dsn: str, topic: str) -> bytes:
    rows = await fetch_rows(
        dsn,
        f"SELECT {_LIVE_COLUMNS} FROM verdicts WHERE source_topic = $1 "  # noqa: S608 (constant)
        "ORDER BY source_partition, source_offset",
        topic,
    )
    escalations = await fetch_rows(
        dsn,
        "SELECT source_partition, source_offset, category, priority, auto_decision, reasons "
        "FROM review_items WHERE source_topic = $1 ORDER BY source_partition, source_offset",
        topic,
    )
    return orjson.dumps(
        [[str(v) for v in r.values()] for r in rows]
        + [[str(v) for v in r.values()] for r in escalations]
    )


def _with(settings: WorkerSettings, dsn: str, group: str, **triton: object) -> WorkerSettings:
    return settings.model_copy(
        update={
            "kafka": settings.kafka.model_copy(update={"group_id": group}),
            "postgres": settings.postgres.model_copy(update={"dsn": SecretStr(dsn)}),
            "triton": settings.triton.model_copy(update=triton),
        }
    )


def _counter(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("modstream_shadow_dropped_total", {"reason": reason})
    return float(value or 0.0)


def _scored(metrics: Metrics) -> float:
    return float(metrics.registry.get_sample_value("modstream_shadow_scored_total") or 0.0)


async def _resolve(dsn: str, message_ids: Sequence[str], resolution: str) -> None:
    """What a moderator's decision leaves in ``review_items`` (the review API is not under test
    here): a resolved item for each message."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
            "message_id, group_id, sender_id, message_text, category, auto_decision, status, "
            "resolution, resolved_by, resolved_at) "
            "SELECT source_topic, source_partition, source_offset, sent_at, message_id, group_id, "
            "sender_id, 'text', category, decision, 'resolved', $2, 'mod-1', now() "
            "FROM verdicts WHERE message_id = ANY($1::text[]) "
            "ON CONFLICT (source_topic, source_partition, source_offset) DO UPDATE "
            "SET status = 'resolved', resolution = $2, resolved_by = 'mod-1', resolved_at = now()",
            list(message_ids),
            resolution,
        )
    finally:
        await conn.close()


async def test_shadow_changes_no_live_verdict_and_the_view_shows_its_flips(
    worker_settings: WorkerSettings,
) -> None:
    """Live verdicts are byte-identical without a shadow, with version 1 as the shadow and
    with a shadow that is not served; the shadow rows hold version 1's decisions, and
    ``analytics_shadow_agreement`` / ``analytics_shadow_flips`` count the ``dumb`` messages
    as shadow-softer and the ``scum`` ones as shadow-harsher, all in ``offensive``, with each
    model's agreement with the moderators' decisions."""
    records = _records()
    s = worker_settings
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    topic = s.kafka.input_topic
    plain_dsn = s.postgres.dsn.get_secret_value()
    await _moderate(s, len(records))
    plain = await _live_bytes(plain_dsn, topic)
    assert plain.count(b'"moderation"') == len(records)  # every verdict, each by the model

    async with temporary_database(s, prefix="mstest_shadow") as shadowed_db:
        dsn = shadowed_db.postgres.dsn.get_secret_value()
        # A queue deep enough for the whole burst: this run checks what the shadow decides,
        # not what it sheds.
        shadowed = _with(
            s,
            dsn,
            s.kafka.group_id + "-shadow",
            shadow_model_name="moderation",
            shadow_model_version="1",
            shadow_queue_batches=len(records),
        )
        metrics = await _moderate(shadowed, len(records))
        assert await _live_bytes(dsn, topic) == plain
        assert _scored(metrics) == len(records)

        shadow_rows = await fetch_rows(
            dsn,
            "SELECT model_name, model_version, count(*) AS n FROM shadow_verdicts GROUP BY 1, 2",
        )
        assert [(r["model_name"], r["model_version"], r["n"]) for r in shadow_rows] == [
            ("moderation", "1", len(records))
        ]
        live = {
            r["message_id"]: r["decision"]
            for r in await fetch_rows(dsn, "SELECT message_id, decision FROM verdicts")
        }
        dumb = [f"shadow-{i:03d}" for i in range(_DUMB)]
        scum = [f"shadow-{i:03d}" for i in range(_DUMB, _DUMB + _SCUM)]
        assert all(live[m] != "allow" for m in dumb)  # version 2 knows "dumb"
        assert all(live[m] == "allow" for m in scum)  # ... and not "scum"

        # Moderators agree with version 2 on four "dumb" messages, with version 1 on three
        # "scum" messages.
        await _resolve(dsn, dumb[:4], "remove_message")
        await _resolve(dsn, scum[:3], "warn")
        agreement = await fetch_rows(
            dsn,
            "SELECT * FROM analytics_shadow_agreement WHERE live_version = '2' "
            "AND shadow_version = '1' ORDER BY category",
        )
        by_category = {r["category"]: r for r in agreement}
        offensive = by_category["offensive"]
        assert offensive["shadow_softer"] == _DUMB
        assert offensive["shadow_harsher"] == _SCUM
        assert offensive["moderated"] == 7
        assert offensive["live_agreed_with_moderators"] == 4
        assert offensive["shadow_agreed_with_moderators"] == 3
        assert sum(r["compared"] for r in agreement) == len(records)
        assert sum(r["shadow_softer"] + r["shadow_harsher"] for r in agreement) == _DUMB + _SCUM
        assert sum(r["agreed"] for r in agreement) == len(records) - _DUMB - _SCUM

        shadow = {
            r["message_id"]: r["decision"]
            for r in await fetch_rows(
                dsn,
                "SELECT v.message_id, s.decision FROM shadow_verdicts s JOIN verdicts v "
                "USING (source_topic, source_partition, source_offset, sent_at)",
            )
        }
        assert all(shadow[m] == "allow" for m in dumb)
        assert all(shadow[m] != "allow" for m in scum)
        assert all(shadow[m] == live[m] for m in live if m not in dumb + scum)
        flips = await fetch_rows(
            dsn,
            "SELECT category, live_decision, shadow_decision, messages, example_message_ids "
            "FROM analytics_shadow_flips WHERE live_decision <> shadow_decision",
        )
        expected = Counter((live[m], shadow[m]) for m in dumb + scum)
        assert {r["category"] for r in flips} == {"offensive"}
        assert (
            Counter({(r["live_decision"], r["shadow_decision"]): r["messages"] for r in flips})
            == expected
        )
        assert all(set(r["example_message_ids"]) <= set(dumb + scum) for r in flips)
        documented = await fetch_as_analyst(dsn, documented_query("Shadow model against live"))
        assert {(r["category"], r["live_decision"], r["shadow_decision"]) for r in documented} >= {
            ("offensive", live_decision, shadow_decision)
            for live_decision, shadow_decision in expected
        }

    async with temporary_database(s, prefix="mstest_shadow_down") as outage_db:
        dsn = outage_db.postgres.dsn.get_secret_value()
        outage = _with(
            s, dsn, s.kafka.group_id + "-outage", shadow_model_name="moderation_not_served"
        )
        metrics = await _moderate(outage, len(records))
        assert await _live_bytes(dsn, topic) == plain
        assert _scored(metrics) == 0
        assert _counter(metrics, "unavailable") == len(records)
        assert (await fetch_rows(dsn, "SELECT count(*) AS n FROM shadow_verdicts"))[0]["n"] == 0


async def test_the_online_service_shadows_its_model_batches_too(
    database: str, topics: dict[str, str]
) -> None:
    """The online service, built by the same builder, hands its model batches to the shadow:
    the answer is the live model's (version 2 blocks ``dumb``), the stored shadow row is
    version 1's (it allows it)."""
    base = online_settings_for(database, topics)
    async with temporary_database(base, prefix="mstest_shadow_online") as scoped:
        settings = scoped.model_copy(
            update={
                "triton": scoped.triton.model_copy(
                    update={"shadow_model_name": "moderation", "shadow_model_version": "1"}
                )
            }
        )
        dsn = settings.postgres.dsn.get_secret_value()
        token = await make_token(dsn)
        async with running_service(settings) as service:
            assert service.port is not None
            client = Client(service.port, token)
            try:
                answer = await client.check(request("you are dumb", message_id="online-1"))
            finally:
                await client.close()

            async def stored() -> bool:
                rows = await fetch_rows(dsn, "SELECT count(*) AS n FROM shadow_verdicts")
                return int(rows[0]["n"]) == 1

            await wait_until(stored, timeout_s=30)
        [row] = await fetch_rows(
            dsn, "SELECT source_topic, source_offset, model_version, decision FROM shadow_verdicts"
        )
    assert answer.model_version == "2"
    assert answer.decision != "allow"
    assert (row["source_topic"], row["source_offset"]) == ("online", answer.source_offset)
    assert (row["model_version"], row["decision"]) == ("1", "allow")
