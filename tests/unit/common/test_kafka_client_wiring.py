"""Every Kafka client of every program is built with the security arguments of the settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiokafka
import aiokafka.admin
import pytest
from pydantic import SecretStr

from bench import pipeline as bench_pipeline
from common.settings import KafkaSettings
from engine import publisher as worker_publisher
from engine.offsets import OffsetTracker
from review.decisions import KafkaDecisionPublisher
from stack import kafka_tools, samples, topics
from worker import source as worker_source

_SETTINGS = KafkaSettings(
    bootstrap_servers="broker.example:9096",
    security_protocol="SASL_PLAINTEXT",
    sasl_mechanism="SCRAM-SHA-512",
    sasl_username="svc",
    sasl_password=SecretStr("wired-pw"),
)


class _Stop(Exception):
    """Raised by a fake client's start: the constructor arguments are all the test needs."""


class _Recorder:
    """Stands in for an aiokafka client class; remembers each instance's keyword arguments."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, *topics: str, **kwargs: Any) -> _FakeClient:
        self.calls.append(kwargs)
        return _FakeClient()


class _FakeClient:
    async def start(self) -> None:
        raise _Stop

    async def stop(self) -> None:
        return None

    async def close(self) -> None:
        return None


class _NoStore:
    async def stored_offsets(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        return {}


async def _no_drain(_: Any) -> None:
    return None


def _assert_secured(recorder: _Recorder) -> None:
    assert len(recorder.calls) == 1
    kwargs = recorder.calls[0]
    assert kwargs["bootstrap_servers"] == "broker.example:9096"
    assert kwargs["security_protocol"] == "SASL_PLAINTEXT"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kwargs["sasl_plain_username"] == "svc"
    assert kwargs["sasl_plain_password"] == "wired-pw"


async def test_worker_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's consumer (worker.source) gets the SASL arguments."""
    recorder = _Recorder()
    monkeypatch.setattr(worker_source, "AIOKafkaConsumer", recorder)
    source = worker_source.KafkaSource(_SETTINGS, _NoStore(), OffsetTracker(), _no_drain)
    with pytest.raises(_Stop):
        await source.start()
    _assert_secured(recorder)


async def test_worker_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict and dead-letter producer (engine.publisher) gets the SASL arguments."""
    recorder = _Recorder()
    monkeypatch.setattr(worker_publisher, "AIOKafkaProducer", recorder)
    with pytest.raises(_Stop):
        await worker_publisher.KafkaPublisher(_SETTINGS).start()
    _assert_secured(recorder)


async def test_review_decisions_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The review service's decisions relay producer gets the SASL arguments."""
    recorder = _Recorder()
    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", recorder)
    with pytest.raises(_Stop):
        await KafkaDecisionPublisher(_SETTINGS).publish("decisions", [(b"k", b"{}")])
    _assert_secured(recorder)


def test_stack_topic_creation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Topic creation (stack.topics) gets the SASL arguments when given the settings."""
    recorder = _Recorder()
    monkeypatch.setattr(aiokafka.admin, "AIOKafkaAdminClient", recorder)
    with pytest.raises(_Stop):
        topics.ensure_topics(_SETTINGS, (topics.TopicSpec("t", 1),))
    _assert_secured(recorder)


async def test_stack_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition and end-offset look-ups (stack.kafka_tools) get the SASL arguments."""
    admin = _Recorder()
    monkeypatch.setattr(kafka_tools, "AIOKafkaAdminClient", admin)
    with pytest.raises(_Stop):
        await kafka_tools.partition_ids(_SETTINGS, "t")
    _assert_secured(admin)

    async def one_partition(target: object, topic: str) -> list[int]:
        return [0]

    consumer = _Recorder()
    monkeypatch.setattr(kafka_tools, "partition_ids", one_partition)
    monkeypatch.setattr(kafka_tools, "AIOKafkaConsumer", consumer)
    with pytest.raises(_Stop):
        await kafka_tools.end_offsets(_SETTINGS, "t")
    _assert_secured(consumer)


async def test_sample_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample traffic producer (stack.samples) gets the SASL arguments."""
    recorder = _Recorder()
    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", recorder)
    with pytest.raises(_Stop):
        await samples.produce(_SETTINGS, "t", [])
    _assert_secured(recorder)


async def test_bench_topic_creation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's topic creation (bench.pipeline) gets the SASL arguments."""
    recorder = _Recorder()
    monkeypatch.setattr(bench_pipeline, "AIOKafkaAdminClient", recorder)
    with pytest.raises(_Stop):
        await bench_pipeline.create_topic(_SETTINGS, "t")
    _assert_secured(recorder)
