"""The topics the local stack creates: input and verdicts (partitioned), DLQ, decisions, the
appeals and their DLQ."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.kafka_client import kafka_client_kwargs
from common.settings import KafkaSettings
from stack._sync import run_sync
from stack.errors import ServiceStartError

__all__ = ["TopicSpec", "ensure_topics", "list_topics", "stack_topics"]

_ADMIN_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic to create (replication factor is always 1 on the local broker)."""

    name: str
    partitions: int


def stack_topics(kafka: KafkaSettings, input_partitions: int) -> tuple[TopicSpec, ...]:
    """The topics modstream uses, named by ``kafka``; only the input topic is partitioned."""
    return (
        TopicSpec(kafka.input_topic, input_partitions),
        TopicSpec(kafka.dlq_topic, 1),
        TopicSpec(kafka.verdict_topic, input_partitions),
        TopicSpec(kafka.decision_topic, 1),
        TopicSpec(kafka.appeal_topic, 1),
        TopicSpec(kafka.appeal_dlq_topic, 1),
    )


def _new_topic(factory: Any, spec: TopicSpec) -> Any:
    return factory(spec.name, num_partitions=spec.partitions, replication_factor=1)


async def _ensure(target: KafkaSettings | str, specs: tuple[TopicSpec, ...]) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import KafkaError

    kwargs = kafka_client_kwargs(target)
    bootstrap = kwargs["bootstrap_servers"]
    admin = AIOKafkaAdminClient(**kwargs, request_timeout_ms=_ADMIN_TIMEOUT_MS)
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        if missing:
            await admin.create_topics([_new_topic(NewTopic, spec) for spec in missing])
        return [spec.name for spec in missing]
    except KafkaError as exc:
        raise ServiceStartError(f"cannot create topics on {bootstrap}: {exc!r}") from exc
    finally:
        await admin.close()


def ensure_topics(target: KafkaSettings | str, specs: tuple[TopicSpec, ...]) -> list[str]:
    """Create the topics in ``specs`` that do not exist yet; returns the names created.

    ``target`` is the Kafka settings (with their security) or a plaintext bootstrap address.
    """
    return run_sync(lambda: _ensure(target, specs))


async def _list(target: KafkaSettings | str) -> dict[str, int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(target), request_timeout_ms=_ADMIN_TIMEOUT_MS)
    try:
        await admin.start()
        names = await admin.list_topics()
        described = await admin.describe_topics(list(names))
    finally:
        await admin.close()
    return {entry["topic"]: len(entry["partitions"]) for entry in described}


def list_topics(target: KafkaSettings | str) -> dict[str, int]:
    """Topic name → partition count, as the broker reports it (settings or plaintext address)."""
    return run_sync(lambda: _list(target))
