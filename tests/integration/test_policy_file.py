"""The policy file against the real Kafka, PostgreSQL and Triton: the worker and the online
service decide with it from the start, install a changed file without a restart, and refuse a
bad one (counted) while the thresholds in use stay."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import orjson
import pytest
from prometheus_client import CollectorRegistry

from engine.metrics import Metrics
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
from worker.app import Worker
from worker.parts import build_stream_parts
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_LENIENT = "[thresholds]\nflag_offensive = 0.99\nblock_offensive = 0.999\n"
"""Version 2 finds ``dumb`` offensive at about 0.93-0.97: allowed under this file."""
_STRICT = "[thresholds]\nflag_offensive = 0.5\nblock_offensive = 0.6\n"
"""... and blocked under this one."""
_DUMB = "you are dumb"
"""Version 2's cue word and no rule's: the policy file alone decides it ("you are so dumb"
would also hit en.harassment.demeaning, whatever the thresholds)."""
_BAD = "[thresholds]\nflag_offensive = 0.7\nblock_offensive = 0.6\n"
"""A flag threshold above its block threshold: refused."""


def _write(path: Path, text: str) -> None:
    """Replace the file at once (as a ConfigMap or an editor's rename does), a new mtime."""
    staged = path.with_suffix(".tmp")
    staged.write_text(text, encoding="utf-8")
    stamp = datetime.now(UTC).timestamp() + 1
    os.utime(staged, (stamp, stamp))
    staged.replace(path)


def _reloads(registry: CollectorRegistry, result: str) -> float:
    value = registry.get_sample_value("modstream_policy_reloads_total", {"result": result})
    return float(value or 0.0)


def _record(message_id: str, text: str) -> SampleRecord:
    document = {
        "message_id": message_id,
        "group_id": "g-policy",
        "sender_id": "u-policy",
        "text": text,
        "sent_at": datetime.now(UTC).isoformat(),
    }
    return SampleRecord(b"g-policy", orjson.dumps(document), message_id, "x")


async def _decision(dsn: str, message_id: str) -> str | None:
    conn = await asyncpg.connect(dsn)
    try:
        value = await conn.fetchval(
            "SELECT decision FROM verdicts WHERE message_id = $1", message_id
        )
    finally:
        await conn.close()
    return str(value) if value is not None else None


async def _until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    async def check() -> bool:
        return condition()

    await wait_until(check, timeout_s=timeout_s, interval_s=0.1)


async def test_the_worker_loads_reloads_and_refuses_policy_files(
    worker_settings: WorkerSettings, tmp_path: Path
) -> None:
    """Under the lenient file ``dumb`` is allowed; after the file turns strict (no restart) it
    is blocked; a bad file is refused with a counted rejection and the strict thresholds stay."""
    path = tmp_path / "policy.toml"
    _write(path, _LENIENT)
    s = worker_settings.model_copy(
        update={
            "policy_file": worker_settings.policy_file.model_copy(
                update={"path": path, "reload_interval_s": 0.1}
            )
        }
    )
    metrics = Metrics(CollectorRegistry())
    parts = build_stream_parts(
        s, moderation=build_parts(s, consumer_group=s.kafka.group_id, metrics=metrics)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s, parts).run(stop))
    dsn = s.postgres.dsn.get_secret_value()
    bootstrap, topic = s.kafka.bootstrap_servers, s.kafka.input_topic
    try:

        async def decided(message_id: str) -> str:
            async def stored() -> bool:
                if task.done():
                    task.result()
                return await _decision(dsn, message_id) is not None

            await wait_until(stored, timeout_s=60)
            decision = await _decision(dsn, message_id)
            assert decision is not None
            return decision

        await produce(bootstrap, topic, [_record("p-1", _DUMB)])
        assert await decided("p-1") == "allow"

        _write(path, _STRICT)
        await _until(lambda: _reloads(metrics.registry, "installed") == 1)
        await produce(bootstrap, topic, [_record("p-2", _DUMB)])
        assert await decided("p-2") == "block"

        _write(path, _BAD)
        await _until(lambda: _reloads(metrics.registry, "rejected") == 1)
        assert parts.moderation.policy.thresholds.flag_offensive == 0.5
        await produce(bootstrap, topic, [_record("p-3", _DUMB)])
        assert await decided("p-3") == "block"
        gauge = metrics.registry.get_sample_value(
            "modstream_policy_threshold", {"threshold": "block_offensive"}
        )
        assert gauge == 0.6
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)


async def test_the_online_service_loads_reloads_and_refuses_policy_files(
    database: str, topics: dict[str, str], tmp_path: Path
) -> None:
    """The online service answers with the file's thresholds, installs a changed file without a
    restart, and keeps them when a bad file follows."""
    path = tmp_path / "policy.toml"
    _write(path, _LENIENT)
    base = online_settings_for(database, topics)
    settings = base.model_copy(
        update={
            "policy_file": base.policy_file.model_copy(
                update={"path": path, "reload_interval_s": 0.1}
            )
        }
    )
    token = await make_token(database)
    async with running_service(settings) as service:
        assert service.port is not None
        registry = service.parts.moderation.metrics.registry
        client = Client(service.port, token)
        try:
            lenient = await client.check(request(_DUMB))
            _write(path, _STRICT)
            await _until(lambda: _reloads(registry, "installed") == 1)
            strict = await client.check(request(_DUMB))
            _write(path, _BAD)
            await _until(lambda: _reloads(registry, "rejected") == 1)
            kept = await client.check(request(_DUMB))
        finally:
            await client.close()
    assert (lenient.decision, strict.decision, kept.decision) == ("allow", "block", "block")
