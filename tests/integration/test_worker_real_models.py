"""The worker end to end against the REAL model repository (``model_repository/``).

The shared stack serves the small test fixture model so the rest of the suite stays fast on a
CPU; this test starts its own ``tritonserver`` (``stack.private_triton`` on free ports) over
the repository that ``modstream models build`` produced, and runs a worker against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import orjson
import pytest

from common.settings import project_root
from pipelines.canonical import canonicalize
from stack import private_triton
from stack.samples import SampleRecord, produce, sample_stream
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


# (plain, disguised): each disguise is one the canonical text undoes (alternating case,
# full-width letters, zero-width characters, Traditional characters, characters split by
# spaces, Cyrillic look-alike letters inside a Latin word, letters split by dots).
DISGUISED_PAIRS = (
    (
        "you are a worthless idiot and everyone hates you",
        "YoU aRe A wOrThLeSs IdIoT aNd EvErYoNe HaTeS yOu",
    ),
    (
        "shut up you stupid loser",
        "".join(chr(ord(c) + 0xFEE0) if c != " " else c for c in "shut up you stupid loser"),
    ),
    ("go to hell you pathetic clown", "go to he\u200bll you pa\u200bthetic clo\u200bwn"),
    (
        "\u4f60\u8fd9\u4e2a\u5e9f\u7269\u771f\u8ba9\u4eba\u6076\u5fc3",
        "\u4f60\u9019\u500b\u5ee2\u7269\u771f\u8b93\u4eba\u5641\u5fc3",
    ),
    ("\u4f60\u5c31\u662f\u4e2a\u5783\u573e", "\u4f60 \u5c31 \u662f \u4e2a \u5783 \u573e"),
    ("you are an idiot", "you are an \u0456d\u0456\u043et"),
    ("kill yourself loser", "k.i.l.l yourself loser"),
)


def _record(message_id: str, text: str) -> SampleRecord:
    value = orjson.dumps(
        {
            "message_id": message_id,
            "group_id": "disguise-group",
            "sender_id": f"sender-{message_id}",
            "text": text,
            "sent_at": datetime.now(UTC).isoformat(),
        }
    )
    return SampleRecord(b"disguise-group", value, message_id, "pair")


async def test_a_disguised_message_gets_its_plain_forms_decision(
    worker_settings: WorkerSettings, real_triton: str
) -> None:
    """Through the worker and the real models, each disguised message gets exactly the decision,
    decider, category and scores of its plain form: one canonical text feeds rules and model."""
    for plain, disguised in DISGUISED_PAIRS:  # the pairs must be disguises the stage undoes
        assert canonicalize(plain).text == canonicalize(disguised).text
    s = worker_settings.model_copy(
        update={"triton": worker_settings.triton.model_copy(update={"grpc_url": real_triton})}
    )
    records = [
        _record(f"{form}-{i}", text)
        for i, pair in enumerate(DISGUISED_PAIRS)
        for form, text in zip(("plain", "disguised"), pair, strict=True)
    ]
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    conn = await asyncpg.connect(s.postgres.dsn.get_secret_value())
    try:

        async def all_handled() -> bool:
            if task.done():
                task.result()
            n = await conn.fetchval(
                "SELECT count(*) FROM verdicts WHERE source_topic = $1", s.kafka.input_topic
            )
            return int(n) >= len(records)

        await wait_until(all_handled, timeout_s=240)
        stop.set()
        await asyncio.wait_for(task, timeout=60)
        rows = await conn.fetch(
            "SELECT message_id, decision, decided_by, category, scores FROM verdicts "
            "WHERE source_topic = $1",
            s.kafka.input_topic,
        )
    finally:
        await conn.close()
    by_id = {r["message_id"]: r for r in rows}
    for i, (plain, _) in enumerate(DISGUISED_PAIRS):
        a, b = by_id[f"plain-{i}"], by_id[f"disguised-{i}"]
        seen = (a["decision"], a["decided_by"], a["category"])
        assert seen == (b["decision"], b["decided_by"], b["category"]), plain
        assert orjson.loads(a["scores"] or "null") == orjson.loads(b["scores"] or "null"), plain
    assert {r["decided_by"] for r in rows} <= {"rules", "model"}
    assert any(r["decision"] != "allow" for r in rows), "the abusive pairs must not all pass"
