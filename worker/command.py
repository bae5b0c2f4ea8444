"""``modstream worker`` and ``modstream rescore``: settings loaded once, parts built, then run.

``worker`` runs until SIGTERM/SIGINT (exit 0), exits 1 when a task failed (``WorkerFailed``,
logged where it happened), 2 when the Kafka security files cannot be used and 3 when the
brokers refuse the credentials or are not trusted (one logged event instead of endless retries).
``rescore`` re-scores every ``pending_model`` verdict once the model is ready and prints
``rescored=N seconds=S``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from contextlib import AsyncExitStack
from typing import Any

from common.kafka_access import KafkaAccessError, verify_kafka_access
from common.kafka_client import KafkaClientConfigError
from common.logs import configure_logging, get_logger
from engine.parts import build_parts
from worker.app import Worker, WorkerFailed
from worker.settings import WorkerSettings

__all__ = ["register"]

_log = get_logger(__name__)
_EXIT_FAILED = 1
_EXIT_KAFKA_SETTINGS = 2
_EXIT_KAFKA_ACCESS = 3


async def _check_kafka_access(settings: WorkerSettings) -> None:
    """Refused Kafka credentials or an untrusted broker (exit 3), and security files that
    cannot be used (exit 2), end the command with one logged event instead of endless retries."""
    try:
        await verify_kafka_access(settings.kafka)
    except KafkaAccessError as exc:
        _log.error(exc.event, broker=exc.broker, reason=exc.reason, error=str(exc))
        raise SystemExit(_EXIT_KAFKA_ACCESS) from exc
    except KafkaClientConfigError as exc:
        _log.error("kafka_settings_unusable", error=str(exc))
        raise SystemExit(_EXIT_KAFKA_SETTINGS) from exc


async def _run_until_signalled(settings: WorkerSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await _check_kafka_access(settings)
    await Worker(settings).run(stop)


def _run_worker(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    configure_logging(settings.log_level)
    try:
        asyncio.run(_run_until_signalled(settings))
    except WorkerFailed:
        return _EXIT_FAILED  # already logged where it happened, without message text
    return 0


async def _rescore(settings: WorkerSettings, wait_s: float, topic: str | None) -> int:
    parts = build_parts(settings, consumer_group=settings.kafka.group_id)
    started = time.monotonic()
    async with AsyncExitStack() as stack:
        await parts.open(stack, ready_timeout_s=None)
        await parts.inference.wait_ready(wait_s)
        count = await parts.rescorer.rescore_all(topic)
    print(f"rescored={count} seconds={time.monotonic() - started:.1f}")
    return 0


def _run_rescore(args: argparse.Namespace) -> int:
    settings = WorkerSettings()
    configure_logging(settings.log_level)
    return asyncio.run(_rescore(settings, float(args.wait_ready_s), args.topic))


def register(subparsers: Any) -> None:
    worker = subparsers.add_parser("worker", help="run the moderation worker until SIGTERM")
    worker.set_defaults(handler=_run_worker)
    rescore = subparsers.add_parser(
        "rescore", help="re-score pending_model verdicts with the model, update them in place"
    )
    rescore.add_argument(
        "--wait-ready-s",
        type=float,
        default=60.0,
        help="how long to wait for the model to be ready (default 60)",
    )
    rescore.add_argument(
        "--topic", help="only verdicts of this source topic (default: every topic)", default=None
    )
    rescore.set_defaults(handler=_run_rescore)
