"""The model contract on MLServer with a REAL moderation model of ``model_repository/``.

``test_inference_backends.py`` runs the contract against MLServer with the small fixture model;
this runs it with a model that ``modstream models build`` made (tokenizer, ONNX encoder, heads),
so what MLServer's own environment (``.venv-mlserver``) must hold to serve the product is tested
too. Each model named in ``MODELS`` gets an MLServer of its own that serves that model alone (a
view of the repository without the other text models: one encoder in memory, not three),
and a few small batches: the server and every served version ready, the metadata the model's
config declares, rows that are distributions in the contract's widths (``HARMS`` exactly when
the config declares it), abuse ranked above praise in both languages, and the worker end to end
(Kafka in, verdicts in PostgreSQL) scored by that model.

A model whose folder is not in this checkout, or whose built files are missing (the encoder,
tokenizer and ``model.py`` copies are not committed: ``modstream models build``, which
``make test`` runs first), is skipped with the missing paths named.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import numpy as np
import orjson
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from common.settings import project_root
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient
from modelhost.pbtxt import read_model_config
from modelhost.python_backend import served_versions
from pipelines.scores import HARM_LABELS, HARMS_OUTPUT, MODEL_INPUT, MODEL_OUTPUTS
from stack.mlserver import MLSERVER_VENV, MLServerServer, private_mlserver, text_models
from stack.samples import SampleRecord, produce
from tests.integration.conftest import free_ports, wait_until
from tests.integration.test_models import ABUSE as ABUSE_BY_LANGUAGE
from tests.integration.test_models import PRAISE as PRAISE_BY_LANGUAGE
from worker.app import Worker
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration

REPOSITORY = project_root() / "model_repository"
MODELS = ("moderation_v2", "moderation")
"""The real models this suite serves, each when it is in the checkout and built."""
ABUSE = [*ABUSE_BY_LANGUAGE["en"], *ABUSE_BY_LANGUAGE["zh"]]
PRAISE = [*PRAISE_BY_LANGUAGE["en"], *PRAISE_BY_LANGUAGE["zh"]]
CHAT = [f"see you at the match tonight, table {i}" for i in range(12)]


def missing_files(repository: Path, model: str) -> list[Path]:
    """What the built ``model`` needs and lacks: its config, each served version's
    ``model.py``, and every file its config's ``*_file`` parameters name."""
    folder = repository / model
    config_path = folder / "config.pbtxt"
    if not config_path.is_file():
        return [config_path]
    config = read_model_config(config_path)
    needed = [folder / version / "model.py" for version in served_versions(folder, config)]
    if not needed:
        needed.append(folder / "1" / "model.py")
    for key, value in (config.get("parameters") or {}).items():
        if key.endswith("_file"):
            needed.append(folder / str(value["string_value"]))
    return [path for path in needed if not path.is_file()]


def single_model_view(repository: Path, model: str, into: Path) -> Path:
    """``into`` holding links to every folder of ``repository`` but the other text models (the
    other moderation models, the tokenizer), so an MLServer over it serves ``model`` alone; the
    config's relative paths (``../tokenizer/...``) are followed through the link into
    ``repository`` itself."""
    others = set(text_models(repository)) - {model}
    into.mkdir(parents=True)
    for entry in repository.iterdir():
        if entry.name not in others:
            (into / entry.name).symlink_to(entry.resolve())
    return into


def _declares_harms(model: str) -> bool:
    config = read_model_config(REPOSITORY / model / "config.pbtxt")
    return any(o["name"] == HARMS_OUTPUT for o in config.get("output", []))


@pytest.fixture(scope="module", params=MODELS)
def model(request: pytest.FixtureRequest) -> str:
    """A real model of the repository, skipped when it is absent or not built."""
    name = str(request.param)
    if not (REPOSITORY / name).is_dir():
        pytest.skip(f"model_repository/{name} is not in this checkout")
    missing = missing_files(REPOSITORY, name)
    if missing:
        listed = ", ".join(str(p.relative_to(project_root())) for p in missing)
        pytest.skip(f"{name} is not built (missing {listed}): run `modstream models build`")
    return name


@pytest.fixture(scope="module")
def real_mlserver(model: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLServerServer]:
    """MLServer from .venv-mlserver serving ``model`` alone, on free ports."""
    assert (MLSERVER_VENV / "bin" / "mlserver").is_file(), "run scripts/bootstrap.sh"
    view = single_model_view(REPOSITORY, model, tmp_path_factory.mktemp("view") / "repository")
    ports = free_ports(3)
    state = tmp_path_factory.mktemp("mlserver")
    with private_mlserver(view, state, (ports[0], ports[1], ports[2])) as server:
        yield server


def _client(url: str, model: str, version: str = "") -> TritonModerationClient:
    return TritonModerationClient(
        TritonSettings(grpc_url=url, model_name=model, model_version=version, ready_timeout_s=60)
    )


def _ready(client: grpcclient.InferenceServerClient, model: str, version: str) -> bool:
    """Model-ready as the worker reads it: MLServer's error for a version it lacks is "no"."""
    try:
        return bool(client.is_model_ready(model, version))
    except InferenceServerException:
        return False


def test_the_real_model_and_its_versions_are_ready(
    real_mlserver: MLServerServer, model: str
) -> None:
    """Server ready; the model ready with no version and with each version its config serves;
    the next version, which it does not serve, not ready."""
    folder = REPOSITORY / model
    versions = served_versions(folder, read_model_config(folder / "config.pbtxt"))
    client = grpcclient.InferenceServerClient(real_mlserver.endpoint)
    try:
        assert client.is_server_ready()
        for version in ("", *versions):
            assert _ready(client, model, version), version
        assert not _ready(client, model, str(int(versions[-1]) + 1))
    finally:
        client.close()


def test_metadata_is_what_the_config_declares(real_mlserver: MLServerServer, model: str) -> None:
    """Input TEXT as BYTES [-1, 1]; outputs exactly the config's, FP32 [-1, width], the
    contract's three among them with their label counts, HARMS only when declared."""
    config = read_model_config(REPOSITORY / model / "config.pbtxt")
    client = grpcclient.InferenceServerClient(real_mlserver.endpoint)
    try:
        metadata = client.get_model_metadata(model, as_json=True)
    finally:
        client.close()
    (tensor,) = metadata["inputs"]
    assert (tensor["name"], tensor["datatype"]) == (MODEL_INPUT, "BYTES")
    assert [int(d) for d in tensor["shape"]] == [-1, 1]
    served = {o["name"]: o for o in metadata["outputs"]}
    declared = {str(o["name"]): [int(d) for d in o["dims"]] for o in config["output"]}
    assert set(served) == set(declared)
    for name, dims in declared.items():
        assert served[name]["datatype"] == "FP32"
        assert [int(d) for d in served[name]["shape"]] == [-1, *dims]
    for name, labels in MODEL_OUTPUTS.items():
        assert declared[name] == [len(labels)]
    if HARMS_OUTPUT in declared:
        assert declared[HARMS_OUTPUT] == [len(HARM_LABELS)]


async def test_rows_are_distributions_and_abuse_outranks_praise(
    real_mlserver: MLServerServer, model: str
) -> None:
    """Through the worker's client, three batches: a row per text, each head a distribution,
    harms in [0, 1] exactly when the model declares them, the provenance the model's; every
    abusive line (English and Chinese) less likely ``none`` than every kind one."""
    harms_declared = _declares_harms(model)
    client = _client(real_mlserver.endpoint, model)
    await client.start()
    try:
        results = [await client.infer(batch) for batch in (ABUSE, PRAISE, CHAT)]
    finally:
        await client.stop()
    for batch, result in zip((ABUSE, PRAISE, CHAT), results, strict=True):
        assert result.model_name == model
        assert result.model_version
        assert len(result.scores) == len(batch)
        for row in result.scores:
            for probabilities in (row.sentiment, row.intent, row.toxicity):
                assert abs(sum(probabilities) - 1.0) < 1e-3
                assert min(probabilities) >= 0.0
            assert (row.harms is not None) == harms_declared
            if row.harms is not None:
                assert len(row.harms) == len(HARM_LABELS)
                assert all(0.0 <= p <= 1.0 for p in row.harms)
    abuse, praise, _ = results
    abusive_none = [float(row.toxicity[0]) for row in abuse.scores]
    kind_none = [float(row.toxicity[0]) for row in praise.scores]
    assert max(abusive_none) < min(kind_none), (abusive_none, kind_none)
    assert float(np.mean(kind_none)) > 0.5


def _records(prefix: str) -> list[SampleRecord]:
    out = []
    for i, text in enumerate([*PRAISE, *CHAT[:4]]):
        doc = {
            "message_id": f"{prefix}-{i}",
            "group_id": "group-real",
            "sender_id": f"user-{i % 3}",
            "text": text,
            "sent_at": "2026-12-07T09:00:00+00:00",
        }
        out.append(SampleRecord(b"group-real", orjson.dumps(doc), doc["message_id"], "chat"))
    return out


async def test_the_worker_scores_with_the_real_model_on_mlserver(
    real_mlserver: MLServerServer, model: str, worker_settings: WorkerSettings
) -> None:
    """Kafka in, verdicts in PostgreSQL: every record decided by the model MLServer serves,
    with its name and default version as provenance and its scores (harms when declared)."""
    triton = worker_settings.triton.model_copy(
        update={"grpc_url": real_mlserver.endpoint, "model_name": model, "ready_timeout_s": 60}
    )
    s = worker_settings.model_copy(update={"triton": triton})
    records = _records(f"real-{model}")
    await produce(s.kafka.bootstrap_servers, s.kafka.input_topic, records)
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(s).run(stop))
    dsn = s.postgres.dsn.get_secret_value()

    async def rows() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(
                await conn.fetch(
                    "SELECT decided_by, model_name, model_version, scores::text AS scores "
                    "FROM verdicts WHERE source_topic = $1",
                    s.kafka.input_topic,
                )
            )
        finally:
            await conn.close()

    async def all_scored() -> bool:
        if task.done():
            task.result()  # a crash, not a timeout
        return len(await rows()) >= len(records)

    try:
        await wait_until(all_scored, timeout_s=180)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
    folder = REPOSITORY / model
    default = served_versions(folder, read_model_config(folder / "config.pbtxt"))[-1]
    verdicts = await rows()
    assert len(verdicts) == len(records)
    harms_declared = _declares_harms(model)
    for row in verdicts:
        assert (row["decided_by"], row["model_name"], row["model_version"]) == (
            "model",
            model,
            default,
        )
        scores = orjson.loads(row["scores"])
        assert abs(sum(scores["toxicity"].values()) - 1.0) < 1e-3
        assert ("harms" in scores) == harms_declared
