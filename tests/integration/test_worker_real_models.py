"""The worker end to end against the REAL model repository (``model_repository/``).

The shared stack serves the small test fixture model so the rest of the suite stays fast on a
CPU; this test starts its own ``tritonserver`` (``stack.private_triton`` on free ports) over
the repository that ``modstream models build`` produced, and runs a worker against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from common.settings import project_root
from stack import private_triton
from stack.samples import produce, sample_stream
from tests.integration.conftest import free_ports, wait_until
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

REPOSITORY = project_root() / "model_repository"


@pytest.fixture(scope="module")
def real_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tritonserver over the built repository; yields its gRPC address."""
    encoder = REPOSITORY / "encoder" / "1" / "model.onnx"
    assert encoder.is_file(), "run `modstream models build` before this test"
    http, grpc, metrics = free_ports(3)
    state = Path(tmp_path_factory.mktemp("real-triton"))
    with private_triton(REPOSITORY, state, (http, grpc, metrics)) as server:
        yield server.endpoint


async def test_worker_scores_with_the_real_models(
    worker_settings: WorkerSettings, real_triton: str
) -> None:
    """Every produced record gets exactly one outcome; records the rules leave to the model are
    scored by the real ``moderation`` ensemble (version 1), and abusive sample lines end up with
    a higher mean toxicity than benign ones."""
    s = worker_settings.model_copy(
        update={"triton": worker_settings.triton.model_copy(update={"grpc_url": real_triton})}
    )
    records = list(sample_stream(240, seed=3, malformed_every=30, id_prefix="real"))
    kinds = {r.message_id: r.kind for r in records if r.message_id is not None}
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)

    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    dsn = s.postgres.dsn.get_secret_value()
    conn = await asyncpg.connect(dsn)
    try:

        async def all_handled() -> bool:
            if task.done():
                task.result()
            n = await conn.fetchval(
                "SELECT (SELECT count(*) FROM verdicts WHERE source_topic = $1) + "
                "(SELECT count(*) FROM dead_letters WHERE source_topic = $1)",
                s.kafka.input_topic,
            )
            return int(n) >= len(records)

        await wait_until(all_handled, timeout_s=240)
        stop.set()
        await asyncio.wait_for(task, timeout=60)
        rows = await conn.fetch(
            "SELECT message_id, decided_by, model_name, model_version, "
            "(scores->'toxicity'->>'none')::float AS tox_none FROM verdicts "
            "WHERE source_topic = $1",
            s.kafka.input_topic,
        )
    finally:
        await conn.close()

    assert sorted(r["message_id"] for r in rows) == sorted(kinds)
    scored = [r for r in rows if r["decided_by"] == "model"]
    assert scored, "some records must reach the model"
    assert {(r["model_name"], r["model_version"]) for r in scored} == {("moderation", "1")}
    assert not [r for r in rows if r["decided_by"] == "pending_model"]

    def mean_toxicity(kind: str) -> float:
        values = [1.0 - r["tox_none"] for r in scored if kinds[r["message_id"]] == kind]
        assert values, f"no {kind} sample reached the model"
        return sum(values) / len(values)

    assert mean_toxicity("abusive") > mean_toxicity("benign") + 0.2
