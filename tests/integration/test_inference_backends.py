"""The model contract on two Open Inference Protocol servers, and the worker on every backend.

The fixture model (both versions) is served by the stack's Triton and by an MLServer of its own
(``stack.mlserver``: its own virtual environment, the same ``model.py`` through the
``modelhost`` runtime). The same contract checks run against both through the worker's own
client, so what passes is the protocol, not one vendor's server. Then the worker runs end to end
(Kafka in, verdicts in PostgreSQL) on each backend, Triton, MLServer and in-process, with the
default version and with version 1 pinned (``triton.model_version``: the switch and rollback).
Version 2 answers the optional HARMS output and version 1 does not, so both kinds of model are
covered: the harms reach the verdicts of version 2 and decide them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import numpy as np
import orjson
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from common.settings import project_root
from engine.breaker import BreakerState
from engine.inference import InferenceRejected
from engine.settings import InferenceSettings, TritonSettings
from engine.triton import TritonModerationClient
from pipelines.scores import HARM_LABELS, HARMS_OUTPUT, MODEL_INPUT, MODEL_OUTPUTS
from stack.mlserver import MLSERVER_VENV, MLServerServer, private_mlserver
from stack.samples import SampleRecord, produce
from tests.integration.conftest import free_ports, wait_until
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

FIXTURE = project_root() / "tests" / "fixtures" / "model_repository"
REJECT_MARKER = "fixture-reject-me"
_OFFENSIVE = 1
_TEXTS = ["you are dumb", "you are scum", "hello friends", "you idiot", "is it raining?"]


@pytest.fixture(scope="module")
def mlserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLServerServer]:
    """MLServer over the fixture repository, from .venv-mlserver (made by bootstrap, offline
    here: nothing is installed or fetched), on free ports."""
    assert (MLSERVER_VENV / "bin" / "mlserver").is_file(), "run scripts/bootstrap.sh"
    http, grpc, metrics = free_ports(3)
    with private_mlserver(FIXTURE, tmp_path_factory.mktemp("mlserver"), (http, grpc, metrics)) as s:
        yield s


@pytest.fixture(params=["triton", "mlserver"])
def server_url(request: pytest.FixtureRequest, stack_settings: WorkerSettings) -> str:
    """The gRPC address of the stack's Triton, or of the MLServer above."""
    if request.param == "triton":
        return stack_settings.triton.grpc_url
    server: MLServerServer = request.getfixturevalue("mlserver")
    return server.endpoint


def _client(url: str, version: str = "") -> TritonModerationClient:
    return TritonModerationClient(
        TritonSettings(grpc_url=url, model_version=version, ready_timeout_s=30)
    )


def _ready(client: grpcclient.InferenceServerClient, version: str) -> bool:
    """Model-ready as the worker reads it: an error (MLServer answers UNKNOWN for a version it
    does not have, Triton ``false``) is not ready (``engine.replicas.Replica.is_ready``)."""
    try:
        return bool(client.is_model_ready("moderation", version))
    except InferenceServerException:
        return False


def test_the_server_and_both_fixture_versions_are_ready(server_url: str) -> None:
    """Server ready, ``moderation`` ready with no version, version 1 and version 2; a version
    it does not serve is never ready."""
    client = grpcclient.InferenceServerClient(server_url)
    try:
        assert client.is_server_ready()
        for version in ("", "1", "2"):
            assert _ready(client, version), version
        assert not _ready(client, "3")
    finally:
        client.close()


def test_metadata_names_the_contracts_tensors(server_url: str) -> None:
    """Model metadata: input TEXT as BYTES [-1, 1]; the three outputs and HARMS, FP32 with the
    contract's widths."""
    client = grpcclient.InferenceServerClient(server_url)
    try:
        metadata = client.get_model_metadata("moderation", as_json=True)
    finally:
        client.close()
    (tensor,) = metadata["inputs"]
    assert (tensor["name"], tensor["datatype"]) == (MODEL_INPUT, "BYTES")
    assert [int(d) for d in tensor["shape"]] == [-1, 1]
    outputs = {o["name"]: o for o in metadata["outputs"]}
    assert set(outputs) == {*MODEL_OUTPUTS, HARMS_OUTPUT}
    for name, labels in {**MODEL_OUTPUTS, HARMS_OUTPUT: HARM_LABELS}.items():
        assert outputs[name]["datatype"] == "FP32"
        assert [int(d) for d in outputs[name]["shape"]] == [-1, len(labels)]


async def test_rows_honour_the_contract_and_each_version_its_cues(server_url: str) -> None:
    """Through the worker's client: a row per text, each a distribution; no version answers
    as version 2 and says so; version 1 alone finds ``scum`` offensive, version 2 ``dumb``."""
    results = {}
    for version in ("", "1", "2"):
        client = _client(server_url, version)
        await client.start()
        try:
            results[version] = await client.infer(_TEXTS)
        finally:
            await client.stop()
    assert [results[v].model_version for v in ("", "1", "2")] == ["2", "1", "2"]
    for result in results.values():
        assert result.model_name == "moderation"
        assert len(result.scores) == len(_TEXTS)
        for row in result.scores:
            for probabilities in (row.sentiment, row.intent, row.toxicity):
                assert abs(sum(probabilities) - 1.0) < 1e-3
    tox = {v: [int(np.argmax(s.toxicity)) for s in r.scores] for v, r in results.items()}
    assert tox["1"][:2] == [0, _OFFENSIVE]
    assert tox["2"][:2] == [_OFFENSIVE, 0]
    assert tox[""] == tox["2"]
    assert tox["1"][3] == tox["2"][3] == _OFFENSIVE  # both versions share "idiot"
    assert int(np.argmax(results["1"].scores[4].intent)) == 1  # a question


async def test_harms_come_from_version_2_only(server_url: str) -> None:
    """Through the worker's client (which reads the metadata and asks for HARMS): version 2's
    rows carry five harms, ``ambush`` raising the threat; version 1's have none, and it still
    answers."""
    texts = ["watch for the ambush tonight", "hello friends"]
    harms = {}
    for version in ("1", "2"):
        client = _client(server_url, version)
        await client.start()
        try:
            harms[version] = [row.harms for row in (await client.infer(texts)).scores]
        finally:
            await client.stop()
    assert harms["1"] == [None, None]
    threat, calm = harms["2"]
    assert threat is not None
    assert calm is not None
    assert max(range(len(HARM_LABELS)), key=threat.__getitem__) == HARM_LABELS.index("threat")
    assert threat[HARM_LABELS.index("threat")] > 0.9
    assert max(calm) < 0.01


async def test_a_refused_request_is_rejected_and_the_breaker_stays_closed(
    server_url: str,
) -> None:
    """A text the model refuses (the fixture's marker) is an ``InferenceRejected`` (not
    retriable); the server answered, so the breaker stays closed and the next call works."""
    client = _client(server_url)
    await client.start()
    try:
        with pytest.raises(InferenceRejected) as refused:
            await client.infer(["hello", f"a {REJECT_MARKER} b"])
        assert "INVALID_ARGUMENT" in str(refused.value)
        assert client.state is BreakerState.CLOSED
        assert len((await client.infer(["hello"])).scores) == 1
    finally:
        await client.stop()


async def test_mlserver_answers_what_triton_answers(
    mlserver: MLServerServer, stack_settings: WorkerSettings
) -> None:
    """The same texts give the same rows from both servers, version by version: one model code,
    two hosts."""
    for version in ("1", "2"):
        answers = []
        for url in (stack_settings.triton.grpc_url, mlserver.endpoint):
            client = _client(url, version)
            await client.start()
            try:
                answers.append((await client.infer(_TEXTS)).scores)
            finally:
                await client.stop()
        triton_rows, mlserver_rows = answers
        for ours, theirs in zip(triton_rows, mlserver_rows, strict=True):
            np.testing.assert_allclose(ours.toxicity, theirs.toxicity, atol=1e-6)
            np.testing.assert_allclose(ours.sentiment, theirs.sentiment, atol=1e-6)
            np.testing.assert_allclose(ours.intent, theirs.intent, atol=1e-6)
            assert (ours.harms is None) == (theirs.harms is None) == (version == "1")
            if ours.harms is not None and theirs.harms is not None:
                np.testing.assert_allclose(ours.harms, theirs.harms, atol=1e-6)


# --- the worker end to end, on each backend ----------------------------------------------------

_MESSAGES = {
    "m-dumb": "you are so dumb today",
    "m-scum": "you are scum, all of you",
    "m-threat": "watch for the ambush tonight",
    "m-insult": "you muppet, nobody asked you",
}
_CLEAN = [f"see you at the match tonight number {i}" for i in range(8)]


def _records(prefix: str) -> list[SampleRecord]:
    texts = {**_MESSAGES, **{f"m-clean-{i}": t for i, t in enumerate(_CLEAN)}}
    out = []
    for message_id, text in texts.items():
        doc = {
            "message_id": f"{prefix}-{message_id}",
            "group_id": "group-1",
            "sender_id": "user-1",
            "text": text,
            "sent_at": "2026-12-04T10:00:00+00:00",
        }
        out.append(SampleRecord(b"group-1", orjson.dumps(doc), doc["message_id"], "chat"))
    return out


def _backend_settings(
    request: pytest.FixtureRequest, settings: WorkerSettings, backend: str, version: str
) -> WorkerSettings:
    triton = settings.triton.model_copy(update={"model_version": version})
    inference = InferenceSettings()
    if backend == "mlserver":
        server: MLServerServer = request.getfixturevalue("mlserver")
        triton = triton.model_copy(update={"grpc_url": server.endpoint})
    elif backend == "inprocess":
        inference = InferenceSettings(backend="inprocess", repository=FIXTURE)
        # Nothing listens here: a verdict from the model proves the in-process backend gave it.
        triton = triton.model_copy(update={"grpc_url": "127.0.0.1:9"})
    return settings.model_copy(update={"triton": triton, "inference": inference})


@pytest.mark.parametrize("version", ["", "1"], ids=["default", "pinned-1"])
@pytest.mark.parametrize("backend", ["triton", "mlserver", "inprocess"])
async def test_the_worker_runs_end_to_end_on_every_backend(
    request: pytest.FixtureRequest,
    worker_settings: WorkerSettings,
    backend: str,
    version: str,
) -> None:
    """Every record gets a model verdict whose provenance names ``moderation`` and the version
    that scored it (2 by default, 1 when pinned); the decisions are that version's: ``dumb``
    flagged by 2 alone, ``scum`` by 1 alone. Rolling back is setting ``triton.model_version``.
    Version 2's verdicts carry its harms and are decided by them (the threat flagged under
    ``threat`` and escalated at its priority floor, the insult flagged under ``offensive``);
    version 1's have none and allow both messages."""
    s = _backend_settings(request, worker_settings, backend, version)
    records = _records(f"{backend}-{version or 'default'}")
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    dsn = s.postgres.dsn.get_secret_value()

    async def rows() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(
                await conn.fetch(
                    "SELECT message_id, decided_by, model_name, model_version, toxicity_label, "
                    "decision, category, escalated, priority, reasons, scores::text AS scores "
                    "FROM verdicts WHERE source_topic = $1",
                    s.kafka.input_topic,
                )
            )
        finally:
            await conn.close()

    async def all_scored() -> bool:
        if task.done():
            task.result()  # surface a crash instead of waiting for the timeout
        return len(await rows()) >= len(records)

    try:
        await wait_until(all_scored, timeout_s=120)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
    verdicts = {r["message_id"]: r for r in await rows()}
    prefix = f"{backend}-{version or 'default'}-"
    assert len(verdicts) == len(records)
    served = version or "2"
    for row in verdicts.values():
        assert (row["decided_by"], row["model_name"], row["model_version"]) == (
            "model",
            "moderation",
            served,
        )
    labels = {mid.removeprefix(prefix): row["toxicity_label"] for mid, row in verdicts.items()}
    flagged_by_this_version = "m-scum" if served == "1" else "m-dumb"
    allowed_by_this_version = "m-dumb" if served == "1" else "m-scum"
    assert labels[flagged_by_this_version] == "offensive"
    assert labels[allowed_by_this_version] == "none"
    assert all(labels[f"m-clean-{i}"] == "none" for i in range(len(_CLEAN)))
    by_id = {mid.removeprefix(prefix): row for mid, row in verdicts.items()}
    threat, insult = by_id["m-threat"], by_id["m-insult"]
    if served == "1":
        assert all("harms" not in orjson.loads(row["scores"]) for row in verdicts.values())
        assert (threat["decision"], insult["decision"]) == ("allow", "allow")
        return
    assert all(
        set(orjson.loads(row["scores"])["harms"]) == set(HARM_LABELS) for row in by_id.values()
    )
    assert orjson.loads(threat["scores"])["harms"]["threat"] > 0.9
    assert (threat["decision"], threat["category"], threat["escalated"]) == ("flag", "threat", True)
    assert threat["priority"] >= 0.85
    assert any(reason.startswith("harms.threat=") for reason in threat["reasons"])
    assert (insult["decision"], insult["category"]) == ("flag", "offensive")
    assert any(reason.startswith("harms.insult=") for reason in insult["reasons"])
    assert all(by_id[f"m-clean-{i}"]["decision"] == "allow" for i in range(len(_CLEAN)))
