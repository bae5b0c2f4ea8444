"""Rule hit spans end to end: the worker stores and publishes where each rule matched."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import orjson
import pytest

from pipelines.verdict_codec import hits_from_json
from stack.samples import SampleRecord, produce
from tests.integration.conftest import wait_until
from tests.integration.test_pipeline import _drain_topic
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

TEXTS = {
    "spans-1": "well f.u.c.k y0u then",
    "spans-2": "go kiiiiill yourself",
    "spans-3": "see you at five",
}


def _record(message_id: str, text: str) -> SampleRecord:
    value = orjson.dumps(
        {
            "message_id": message_id,
            "group_id": "room-spans",
            "sender_id": "u-spans",
            "text": text,
            "sent_at": datetime.now(UTC).isoformat(),
        }
    )
    return SampleRecord(b"room-spans", value, message_id, "abusive")


async def test_spans_are_stored_and_published_as_raw_offsets(
    worker_settings: WorkerSettings,
) -> None:
    """A disguised message's rule hits carry spans that mark the raw characters as typed, in
    the ``verdicts`` row and in the published verdict alike; a clean message has no hits."""
    s = worker_settings
    await produce(
        s.kafka.bootstrap_servers,
        s.kafka.input_topic,
        [_record(message_id, text) for message_id, text in TEXTS.items()],
    )
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    dsn = s.postgres.dsn.get_secret_value()

    async def stored() -> bool:
        if task.done():
            task.result()
        count = await conn.fetchval(
            "SELECT count(*) FROM verdicts WHERE source_topic = $1", s.kafka.input_topic
        )
        return int(count) == len(TEXTS)

    conn = await asyncpg.connect(dsn)
    try:
        await wait_until(stored, timeout_s=120)
        stop.set()
        await asyncio.wait_for(task, timeout=60)
        rows = await conn.fetch(
            "SELECT message_id, rule_hits::text AS rule_hits FROM verdicts WHERE source_topic = $1",
            s.kafka.input_topic,
        )
    finally:
        await conn.close()
    marked = {
        row["message_id"]: [
            TEXTS[row["message_id"]][start:end]
            for hit in hits_from_json(orjson.loads(row["rule_hits"]))
            for start, end in hit.spans
        ]
        for row in rows
    }
    assert "f.u.c.k y0u" in marked["spans-1"]
    assert any("kiiiiill" in piece for piece in marked["spans-2"])
    assert marked["spans-3"] == []

    published = await _drain_topic(s.kafka.bootstrap_servers, s.kafka.verdict_topic, len(TEXTS))
    payloads = {
        p["message_id"]: p
        for p in (orjson.loads(r.value) for r in published)  # type: ignore[attr-defined]
    }
    stored_hits = {row["message_id"]: orjson.loads(row["rule_hits"]) for row in rows}
    for message_id, payload in payloads.items():
        assert payload["rule_hits"] == stored_hits[message_id]
        assert "text" not in payload
    spans = [hit["spans"] for hit in payloads["spans-1"]["rule_hits"] if "spans" in hit]
    assert spans
    assert all(isinstance(bound, int) for pairs in spans for pair in pairs for bound in pair)
