"""Built-in sample chat traffic for the demo, the integration tests and the benchmark.

Texts come from ``pipelines/samples/chat.jsonl`` (English and Chinese; benign, abusive, spam).
Malformed records are generated to exercise the dead-letter path. Everything is seeded, so a
given ``(count, seed)`` always produces the same stream.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources

import orjson

from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings

__all__ = ["SampleRecord", "load_texts", "produce", "sample_stream"]

_MALFORMED: tuple[bytes, ...] = (
    b"{not json at all",
    b'{"message_id": 42, "group_id": "g", "sender_id": "u", "text": "x",'
    b' "sent_at": "2026-01-01T00:00:00Z"}',
    b'{"group_id": "g1", "sender_id": "u1", "text": "missing id",'
    b' "sent_at": "2026-01-01T00:00:00Z"}',
    b'["an", "array", "not", "an", "object"]',
    b"\xff\xfe\xfa invalid utf-8",
    b'{"message_id": "m", "group_id": "g", "sender_id": "u", "text": "bad time",'
    b' "sent_at": "yesterday"}',
)


@dataclass(frozen=True, slots=True)
class SampleRecord:
    key: bytes
    value: bytes
    message_id: str | None
    """``None`` for a malformed record (it has no usable id)."""
    kind: str
    """``benign``, ``abusive``, ``spam`` or ``malformed``."""


@cache
def load_texts() -> tuple[tuple[str, str, str], ...]:
    """(kind, lang, text) rows of the shipped sample file."""
    raw = resources.files("pipelines").joinpath("samples/chat.jsonl").read_bytes()
    rows = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
    return tuple((r["kind"], r["lang"], r["text"]) for r in rows)


def sample_stream(
    count: int,
    *,
    seed: int = 7,
    malformed_every: int = 0,
    groups: int = 20,
    senders: int = 200,
    id_prefix: str = "demo",
    start: datetime | None = None,
) -> Iterator[SampleRecord]:
    """``count`` records; every ``malformed_every``-th one is malformed (0 = none)."""
    rng = random.Random(seed)
    texts = load_texts()
    base = start or datetime.now(UTC).replace(microsecond=0)
    for i in range(count):
        group = f"group-{rng.randrange(groups)}"
        if malformed_every and i % malformed_every == malformed_every - 1:
            bad = _MALFORMED[(i // malformed_every) % len(_MALFORMED)]
            yield SampleRecord(group.encode(), bad, None, "malformed")
            continue
        kind, _lang, text = texts[rng.randrange(len(texts))]
        message_id = f"{id_prefix}-{i:07d}"
        document = {
            "message_id": message_id,
            "group_id": group,
            "sender_id": f"user-{rng.randrange(senders)}",
            "text": text,
            "sent_at": (base + timedelta(milliseconds=i)).isoformat(),
            "metadata": {"platform": "demo"},
        }
        yield SampleRecord(group.encode(), orjson.dumps(document), message_id, kind)


async def produce(
    target: KafkaSettings | str,
    topic: str,
    records: list[SampleRecord],
    *,
    linger_ms: int = 20,
) -> None:
    """Publish ``records`` to ``topic`` (keyed by group, like a chat platform) and wait for acks.

    ``target`` is the Kafka settings (their security applies) or a plaintext bootstrap address.
    """
    import asyncio

    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**kafka_client_kwargs(target), linger_ms=linger_ms, acks="all")
    await producer.start()
    try:
        pending = [await producer.send(topic, r.value, key=r.key) for r in records]
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
