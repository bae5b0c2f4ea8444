"""The worker over SASL_SSL (SCRAM-SHA-512) against a broker with the stack's secure listener.

The module runs its own Kafka broker (``kafka_secure=True``) in a temporary state folder on free
ports, so the running stack's broker is never touched; PostgreSQL and Triton are the running
stack's. The broker's jars are copied from the configured stack's state folder when it holds them
(``MODSTREAM_STACK__STATE_DIR``), else fetched with Maven as ``modstream stack up`` does.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings
from stack.kafka import KafkaServer
from stack.kafka_secure import SecureListener, secure_kafka_settings
from stack.samples import produce, sample_stream
from stack.settings import StackSettings, StackToolSettings
from stack.topics import TopicSpec, ensure_topics, list_topics
from tests.integration.conftest import free_ports, wait_until
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

_FAIL_FAST_S = 30.0


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackSettings]:
    """A broker with PLAINTEXT and SASL_SSL listeners in a temporary state folder; stopped after."""
    state_dir = tmp_path_factory.mktemp("kafka-secure-stack")
    plain, controller, secure = free_ports(3)
    settings = StackSettings(
        state_dir=state_dir,
        kafka_port=plain,
        kafka_controller_port=controller,
        kafka_secure=True,
        kafka_secure_port=secure,
        kafka_heap_mb=384,
    )
    server = KafkaServer(settings)
    existing = KafkaServer(StackToolSettings().stack)
    if existing.jars_ready():  # copy (never change) the configured stack's jars
        shutil.copytree(existing.libs_dir, server.libs_dir)
    try:
        server.start()
        yield settings
    finally:
        server.stop()


def _topics(kafka: KafkaSettings) -> KafkaSettings:
    suffix = uuid.uuid4().hex[:8]
    return kafka.model_copy(
        update={
            "input_topic": f"sec.{suffix}.chat.messages",
            "dlq_topic": f"sec.{suffix}.chat.messages.dlq",
            "verdict_topic": f"sec.{suffix}.moderation.verdicts",
            "decision_topic": f"sec.{suffix}.moderation.decisions",
            "group_id": f"sec-{suffix}",
        }
    )


def _worker_env(kafka: KafkaSettings, base: WorkerSettings, dsn: str) -> dict[str, str]:
    """The worker's environment: Kafka entirely from ``MODSTREAM_KAFKA__*`` lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODSTREAM_KAFKA__")}
    password = kafka.sasl_password.get_secret_value() if kafka.sasl_password else ""
    env.update(
        {
            "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "MODSTREAM_KAFKA__SECURITY_PROTOCOL": kafka.security_protocol,
            "MODSTREAM_KAFKA__SASL_MECHANISM": str(kafka.sasl_mechanism),
            "MODSTREAM_KAFKA__SASL_USERNAME": str(kafka.sasl_username),
            "MODSTREAM_KAFKA__SASL_PASSWORD": password,
            "MODSTREAM_KAFKA__SSL_CAFILE": str(kafka.ssl_cafile),
            "MODSTREAM_KAFKA__INPUT_TOPIC": kafka.input_topic,
            "MODSTREAM_KAFKA__DLQ_TOPIC": kafka.dlq_topic,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": kafka.verdict_topic,
            "MODSTREAM_KAFKA__GROUP_ID": kafka.group_id,
            "MODSTREAM_POSTGRES__DSN": dsn,
            "MODSTREAM_TRITON__GRPC_URL": base.triton.grpc_url,
            "MODSTREAM_BATCH__MAX_WAIT_S": "0.2",
            "MODSTREAM_HTTP__PORT": "0",
        }
    )
    return env


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "modstream.cli", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )


async def _outcomes(dsn: str, topic: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        verdicts = await conn.fetchval(
            "SELECT count(*) FROM verdicts WHERE source_topic = $1", topic
        )
        dead = await conn.fetchval(
            "SELECT count(*) FROM dead_letters WHERE source_topic = $1", topic
        )
    finally:
        await conn.close()
    return int(verdicts), int(dead)


async def _read_all(kafka: KafkaSettings, topic: str, expected: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        topic, **kafka_client_kwargs(kafka), auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while len(values) < expected and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            values.extend(r.value for records in batch.values() for r in records)
    finally:
        await consumer.stop()
    return values


def test_secure_listener_files_and_plaintext_listener(secure_stack: StackSettings) -> None:
    """The client credentials file is 0600 and the PLAINTEXT listener still answers beside
    SASL_SSL, which lists the same topics with the SCRAM login."""
    listener = SecureListener(secure_stack)
    assert listener.credentials_path.stat().st_mode & 0o777 == 0o600
    assert listener.keystore.stat().st_mode & 0o777 == 0o600
    secure = secure_kafka_settings(secure_stack, KafkaSettings())
    ensure_topics(secure, (TopicSpec("sec.listing", 1),))
    plaintext = f"127.0.0.1:{secure_stack.kafka_port}"
    assert "sec.listing" in list_topics(plaintext)
    assert "sec.listing" in list_topics(secure)


async def test_worker_end_to_end_over_sasl_ssl(
    secure_stack: StackSettings, stack_settings: WorkerSettings, database: str, tmp_path: Path
) -> None:
    """Records produced over SASL_SSL become verdict rows and dead letters, and verdicts are
    published over SASL_SSL, by a worker configured only through MODSTREAM_KAFKA__* lines."""
    kafka = _topics(secure_kafka_settings(secure_stack, stack_settings.kafka))
    ensure_topics(
        kafka,
        (
            TopicSpec(kafka.input_topic, 2),
            TopicSpec(kafka.dlq_topic, 1),
            TopicSpec(kafka.verdict_topic, 2),
        ),
    )
    records = list(sample_stream(60, seed=3, malformed_every=20, id_prefix="sec"))
    good = [r for r in records if r.message_id is not None]
    await produce(kafka, kafka.input_topic, records)

    log = tmp_path / "worker.log"
    worker = _start_worker(_worker_env(kafka, stack_settings, database), log)
    try:

        async def all_handled() -> bool:
            assert worker.poll() is None, log.read_text(errors="replace")[-2000:]
            return sum(await _outcomes(database, kafka.input_topic)) >= len(records)

        await wait_until(all_handled, timeout_s=120)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, log.read_text(errors="replace")[-2000:]
    assert await _outcomes(database, kafka.input_topic) == (len(good), len(records) - len(good))
    published = await _read_all(kafka, kafka.verdict_topic, len(good))
    ids = sorted(orjson.loads(value)["message_id"] for value in published)
    assert ids == sorted(r.message_id for r in good)
    password = kafka.sasl_password.get_secret_value() if kafka.sasl_password else "?"
    assert password not in log.read_text(errors="replace")


@pytest.mark.parametrize(
    ("change", "event"),
    [
        ({"sasl_password": "wrong-Pa55word-xyz"}, "kafka_authentication_failed"),
        ({"sasl_username": "nobody-here"}, "kafka_authentication_failed"),
        ({"ssl_cafile": "/etc/ssl/certs/ca-certificates.crt"}, "kafka_tls_failed"),
    ],
)
def test_refused_login_exits_fast_with_a_typed_event(
    secure_stack: StackSettings,
    stack_settings: WorkerSettings,
    database: str,
    change: dict[str, str],
    event: str,
) -> None:
    """A wrong password, an unknown user or an untrusted broker certificate makes the worker
    log one typed event (no secret in it) and exit non-zero within seconds, without retrying."""
    kafka = _topics(secure_kafka_settings(secure_stack, stack_settings.kafka))
    if "ssl_cafile" in change and not Path(change["ssl_cafile"]).is_file():
        pytest.skip("no system CA bundle to stand in for a wrong CA")
    env = _worker_env(kafka, stack_settings, database)
    env.update({f"MODSTREAM_KAFKA__{name.upper()}": value for name, value in change.items()})
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "modstream.cli", "worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=_FAIL_FAST_S * 2,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 3, result.stderr[-2000:]
    assert elapsed < _FAIL_FAST_S
    lines = [orjson.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    failures = [line for line in lines if line.get("event") == event]
    assert len(failures) == 1, result.stderr[-2000:]
    assert failures[0]["level"] == "error"
    assert failures[0]["broker"] == kafka.bootstrap_servers
    real = kafka.sasl_password.get_secret_value() if kafka.sasl_password else "?"
    assert real not in result.stderr
    assert "wrong-Pa55word-xyz" not in result.stderr
