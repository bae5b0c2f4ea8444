"""The local stack end to end: ``modstream stack up/status/down`` on real processes.

Runs its own stack in a temporary state folder on free ports picked at start, so it never touches
a stack started by ``modstream stack up`` for the other integration tests, nor another run of
this module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from common.settings import project_root
from stack import KafkaServer, LocalStack, PostgresServer, TritonServer
from stack.process import cmdline, is_alive, spawn, terminate
from stack.settings import StackToolSettings
from stack.topics import list_topics
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration

FIXTURE_REPOSITORY = project_root() / "tests" / "fixtures" / "model_repository"
MODSTREAM = [sys.executable, "-m", "modstream.cli", "stack"]
PORT_KEYS = (
    "KAFKA_PORT",
    "KAFKA_CONTROLLER_PORT",
    "POSTGRES_PORT",
    "TRITON_HTTP_PORT",
    "TRITON_GRPC_PORT",
    "TRITON_METRICS_PORT",
)


def _run(
    env: dict[str, str], *args: str, timeout_s: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MODSTREAM, *args],
        env=env,
        cwd=project_root(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@pytest.fixture(scope="module")
def stack_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Environment of an isolated stack, brought up once for the module and torn down after.
    When a test of the module failed, the state folder (every service's log) is kept and its
    path printed, so a flaky start can be diagnosed from the full logs."""
    failed_before = request.session.testsfailed
    state_dir = Path(tempfile.mkdtemp(prefix="modstream-stack-it-"))
    state_dir.chmod(0o755)  # the postgres system user must reach its data folder
    env = dict(os.environ)
    env["MODSTREAM_STACK__STATE_DIR"] = str(state_dir)
    env["MODSTREAM_STACK__MODEL_REPOSITORY"] = str(FIXTURE_REPOSITORY)
    for key, port in zip(PORT_KEYS, free_ports(len(PORT_KEYS)), strict=True):
        env[f"MODSTREAM_STACK__{key}"] = str(port)
    up = _run(env, "up")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield env
    finally:
        _run(env, "down")
        if request.session.testsfailed > failed_before:
            sys.stderr.write(f"\nstack integration test failed: state kept in {state_dir}\n")
        else:
            shutil.rmtree(state_dir, ignore_errors=True)


def _settings(env: dict[str, str]) -> StackToolSettings:
    return StackToolSettings(
        stack={  # type: ignore[arg-type]
            "state_dir": env["MODSTREAM_STACK__STATE_DIR"],
            "model_repository": env["MODSTREAM_STACK__MODEL_REPOSITORY"],
            **{key.lower(): int(env[f"MODSTREAM_STACK__{key}"]) for key in PORT_KEYS},
        }
    )


def _processes_with(marker: str) -> list[int]:
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return [pid for pid in pids if any(marker in part for part in cmdline(pid))]


def test_status_reports_every_service_healthy(stack_env: dict[str, str]) -> None:
    """After up, status exits 0 and shows postgres, kafka and triton running and healthy."""
    status = _run(stack_env, "status")
    assert status.returncode == 0, status.stdout
    for name in ("postgres", "kafka", "triton"):
        line = next(row for row in status.stdout.splitlines() if row.startswith(name))
        assert "running" in line
        assert " healthy" in line


def test_up_twice_keeps_one_process_per_service(stack_env: dict[str, str]) -> None:
    """A second up starts nothing: pids stay the same and each marker matches one process."""
    stack = LocalStack(_settings(stack_env))
    before = {s.name: s.pid() for s in stack.select()}
    again = _run(stack_env, "up")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("already running") == 3
    after = {s.name: s.pid() for s in stack.select()}
    assert before == after
    for service in stack.select():
        assert _processes_with(service.marker) == [service.pid()]


def test_topics_exist_with_configured_partitions(stack_env: dict[str, str]) -> None:
    """up created the modstream topics; the input topic has ``partitions`` partitions."""
    settings = _settings(stack_env)
    topics = list_topics(KafkaServer(settings.stack).endpoint)
    assert topics[settings.kafka.input_topic] == settings.stack.partitions
    for name in (settings.kafka.dlq_topic, settings.kafka.verdict_topic,
                 settings.kafka.decision_topic, settings.kafka.appeal_topic,
                 settings.kafka.appeal_dlq_topic):  # fmt: skip
        assert name in topics


async def test_kafka_round_trip_with_a_consumer_group(stack_env: dict[str, str]) -> None:
    """An idempotent producer's record reaches a group consumer that commits its offset."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    settings = _settings(stack_env)
    bootstrap = KafkaServer(settings.stack).endpoint
    topic = settings.kafka.decision_topic
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"stack-it", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="stack-it",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=15_000)
        await consumer.commit()
    finally:
        await consumer.stop()
    values = [record.value for records in batches.values() for record in records]
    assert b"stack-it" in values


async def test_postgres_accepts_the_app_role(stack_env: dict[str, str]) -> None:
    """The modstream role logs into the modstream database over TCP on loopback."""
    import asyncpg

    server = PostgresServer(_settings(stack_env).stack)
    connection = await asyncpg.connect(server.dsn, timeout=10)
    try:
        row = await connection.fetchrow("SELECT current_user AS who, current_database() AS db")
    finally:
        await connection.close()
    assert row is not None
    assert (row["who"], row["db"]) == ("modstream", "modstream")


async def test_sync_api_works_inside_an_event_loop(stack_env: dict[str, str]) -> None:
    """Health probes and topic listing work when called from async code (chaos tests do)."""
    settings = _settings(stack_env)
    kafka = KafkaServer(settings.stack)
    assert kafka.healthy()
    assert settings.kafka.input_topic in list_topics(kafka.endpoint)


def test_triton_serves_the_fixture_over_grpc(stack_env: dict[str, str]) -> None:
    """tritonclient.grpc gets contract-shaped rows summing to 1 from the fixture model."""
    import tritonclient.grpc as grpcclient

    server = TritonServer(_settings(stack_env).stack)
    client = grpcclient.InferenceServerClient(server.endpoint)
    try:
        assert client.is_model_ready("moderation")
        texts = np.array([[b"hello"], [b"you idiot"], [b"buy now"]], dtype=np.object_)
        text_input = grpcclient.InferInput("TEXT", [3, 1], "BYTES")
        text_input.set_data_from_numpy(texts)
        result = client.infer("moderation", [text_input])
    finally:
        client.close()
    for name, width in (("SENTIMENT", 3), ("INTENT", 4), ("TOXICITY", 3)):
        rows = result.as_numpy(name)
        assert rows.shape == (3, width)
        assert rows.dtype == np.float32
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-3)
    toxicity = result.as_numpy("TOXICITY")
    assert toxicity[1].argmax() == 1  # "idiot" is offensive in the fixture
    assert toxicity[0].argmax() == 0


@pytest.mark.parametrize("name", ["postgres", "kafka", "triton"])
def test_single_service_stops_and_restarts_through_the_api(
    stack_env: dict[str, str], name: str
) -> None:
    """stop() stops only that service (the others stay healthy); start() right after brings it
    back healthy with a new pid, on the same ports, without being taken for dead while the new
    process is still starting."""
    stack = LocalStack(_settings(stack_env))
    service = stack.services[name]
    others = [s for s in stack.select() if s.name != name]
    old_pid = service.pid()
    assert old_pid is not None
    assert service.stop() is True
    assert not service.status().running
    assert not is_alive(old_pid)
    assert all(other.status().healthy for other in others)
    assert service.start() is True
    assert service.status().healthy
    assert service.pid() not in (None, old_pid)
    assert _processes_with(service.marker) == [service.pid()]
    assert all(other.status().healthy for other in others)


def test_down_stops_only_our_processes(stack_env: dict[str, str], tmp_path: Path) -> None:
    """down stops our three services and leaves a foreign process alone, even one whose pid
    sits in our pid file (a pid reused by the kernel)."""
    stack = LocalStack(_settings(stack_env))
    ours = [s.pid() for s in stack.select()]
    foreign = spawn([sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "l")
    try:
        down = _run(stack_env, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert all(pid is not None and not is_alive(pid) for pid in ours)
        stack.services["kafka"].pid_file.write(foreign)
        again = _run(stack_env, "down")
        assert again.returncode == 0
        assert "nothing was running" in again.stdout
        assert is_alive(foreign)
        status = _run(stack_env, "status")
        assert status.returncode == 1
    finally:
        terminate(foreign, "time.sleep(60)", timeout_s=5)
