"""A batch task that raises, against the real Kafka, PostgreSQL and Triton.

The worker runs as a subprocess with ``MODSTREAM_FAILPOINT=raise:during_inference@6`` and batches
of 25 with 4 in flight: the sixth model batch (which can only start after two batches finished,
so verdicts are already stored) raises an exception nothing in the pipeline expects, while other
batches are in flight. The worker must stop loudly
(``batch_task_failed`` in its JSON log, exit 1, no traceback) and a worker started afterwards
without the failpoint must finish the topic with the chaos ledger exact: every produced record is
one verdict or one dead letter, none lost, none doubled, every verdict published.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from tests.chaos.harness import ChaosEnv, Ledger, Outcome, expected_outcome, good_record

pytestmark = pytest.mark.integration

_GOOD = 300
_BATCHES = {"MODSTREAM_BATCH__MAX_ITEMS": "25", "MODSTREAM_BATCH__MAX_IN_FLIGHT": "4"}
_BAD_VALUES = (b"{not json", b"[1, 2, 3]", b'{"message_id": "x"}', b"\xff\xfe")


def _log_events(path: Path, event: str) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for line in path.read_text(errors="replace").splitlines():
        if f'"event":"{event}"' in line:
            doc = orjson.loads(line)
            if isinstance(doc, dict):
                found.append(doc)
    return found


@pytest.mark.timeout(420)
async def test_raising_batch_task_exits_non_zero_and_restart_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    """With ``raise:during_inference@6`` the worker exits 1 and logs ``batch_task_failed``
    (type, no message) with part of the topic stored; the restarted worker settles it and the
    ledger is exact (no record lost, none with two outcomes)."""
    env = ChaosEnv(tmp_path)
    await env.create()
    try:
        topics = await env.new_topics("raise")
        ledger = Ledger()
        rng = random.Random(11)
        max_bytes = env.settings.kafka.max_message_bytes
        records: list[tuple[bytes, bytes, Outcome]] = [
            good_record("raise", i, rng) for i in range(_GOOD)
        ]
        for i in range(20):
            value = _BAD_VALUES[i % len(_BAD_VALUES)]
            records.append((b"g", value, expected_outcome(value, max_bytes)))
        rng.shuffle(records)
        await env.produce(topics, ledger, records)

        armed = env.worker(topics, "armed", instance_id="raise-w0", extra_env=_BATCHES)
        armed.start("raise:during_inference@6")
        armed_rc = await armed.wait_exit(180)
        if armed_rc is None:
            armed.kill()
        handled_after_failure = await env.handled(topics)
        armed_log = armed.log_path.read_text(errors="replace")
        failures = _log_events(armed.log_path, "batch_task_failed")
        stopped = _log_events(armed.log_path, "worker_failed")

        worker = env.worker(topics, "w0", instance_id="raise-w0", extra_env=_BATCHES)
        worker.start()
        settled = await env.wait_settled(topics, ledger, 240, [worker])
        final_rc = await worker.terminate()
        result = await ledger.check(env, topics)
    finally:
        await env.drop()

    assert armed_rc == 1, f"armed worker exited {armed_rc}; log in {armed.log_path}"
    assert len(failures) == 1, armed_log[-3000:]
    assert failures[0]["error_type"] == "FailpointRaised"
    assert failures[0]["kind"] == "model"
    assert "pass 6" not in armed_log  # the exception's message is never logged
    assert "Traceback" not in armed_log
    assert len(stopped) == 1
    assert handled_after_failure is not None
    assert 0 < handled_after_failure < len(ledger), "expected a partly handled topic"
    assert settled is not None, f"not settled; worker log in {worker.log_path}"
    assert final_rc == 0
    assert (result.lost, result.duplicates, result.misrouted, result.extra) == (0, 0, 0, 0), result
    assert result.exact, result
    assert result.produced == _GOOD + 20
