"""The real model repository under a real ``tritonserver``: loads, honours the contract, ranks,
equals its composing models, and survives concurrent requests.

Needs ``modstream models build`` first (the encoder and tokenizer are not committed). The test
starts its own server on ports 28100-28102 over ``model_repository/`` so it grades these models
whatever the stack happens to serve.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from common.settings import project_root
from modelbuild.serving.pipeline_model import (
    CPU,
    ENCODER_UNFUSED,
    FLOAT32,
    _length_chunks,
    _trim,
    lexicon_scores,
)
from modelhost.pbtxt import read_model_config
from pipelines.scores import HARM_LABELS, HARMS_OUTPUT, MODEL_INPUT, MODEL_OUTPUTS, ModelScores
from stack import TritonServer, private_triton

pytestmark = pytest.mark.integration

Array = np.ndarray[Any, Any]

REPOSITORY = project_root() / "model_repository"
MODERATION_MODELS = ("moderation", "moderation_v2", "moderation_v1")
# The heads each moderation model pins (its config.pbtxt): the served model reads its own head
# files (on the fine-tuned encoder), the previous ones the versioned heads.
HEADS = {
    "moderation": {
        "SENTIMENT": "moderation/heads/sentiment.onnx",
        "INTENT": "moderation/heads/intent.onnx",
        "TOXICITY": "moderation/heads/toxicity.onnx",
        HARMS_OUTPUT: "moderation/heads/harms.onnx",
    },
    "moderation_v2": {"SENTIMENT": "sentiment/2", "INTENT": "intent/2", "TOXICITY": "toxicity/3"},
    "moderation_v1": {"SENTIMENT": "sentiment/1", "INTENT": "intent/1", "TOXICITY": "toxicity/1"},
}
# The encoder files each moderation model reads: float32 and CPU (split int8).
ENCODERS = {
    "moderation": {FLOAT32: "tuned.onnx", CPU: "tuned_cpu.onnx"},
    "moderation_v2": {FLOAT32: "model.onnx", CPU: "model_cpu.onnx"},
    "moderation_v1": {FLOAT32: "model.onnx", CPU: "model_cpu.onnx"},
}
# Heads that read the encoder's features and VADER's scores: not served alone (their input
# differs from the embedding heads' beside them), run from their committed files.
FEATURE_HEADS = ("sentiment/2", "intent/2", "toxicity/3")
# Server-side queue timeout asked for by the slow tests (Triton caps it at the config's 120 s):
# a shared 2-core CPU needs a while for 8 x 100 messages; what is tested is that all are answered.
SLOW_QUEUE_TIMEOUT_US = 300_000_000
ABUSE = {
    "en": ["you are a worthless idiot, shut the fuck up", "fuck off you stupid bitch"],
    "zh": ["你他妈的就是个傻逼", "滚你妈的，垃圾东西"],
}
PRAISE = {
    "en": ["thank you so much, you are wonderful", "what a lovely stream, great job"],
    "zh": ["谢谢你，你真好", "今天的直播太精彩了，辛苦了"],
}


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    for name in ("model.onnx", "tuned.onnx"):
        encoder = REPOSITORY / "encoder" / "1" / name
        assert encoder.is_file(), "run `modstream models build` before the model tests"
    state = tmp_path_factory.mktemp("triton")
    with private_triton(REPOSITORY, state, (28100, 28101, 28102)) as server:
        yield server


@pytest.fixture(scope="module")
def client(triton: TritonServer) -> Iterator[grpcclient.InferenceServerClient]:
    c = grpcclient.InferenceServerClient(triton.endpoint)
    yield c
    c.close()


def _infer(
    client: grpcclient.InferenceServerClient,
    texts: list[str],
    model: str = "moderation",
    queue_timeout_us: int | None = None,
) -> dict[str, Array]:
    data = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
    tensor = grpcclient.InferInput(MODEL_INPUT, list(data.shape), "BYTES")
    tensor.set_data_from_numpy(data)
    result = client.infer(model, [tensor], timeout=queue_timeout_us)
    names = [*MODEL_OUTPUTS, *([HARMS_OUTPUT] if HARMS_OUTPUT in HEADS.get(model, {}) else [])]
    return {name: result.as_numpy(name) for name in names}


def _encode(client: grpcclient.InferenceServerClient, texts: list[str]) -> Any:
    """The ``tokenizer`` then the ``encoder`` model, called one after the other."""
    data = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
    text = grpcclient.InferInput("TEXT", list(data.shape), "BYTES")
    text.set_data_from_numpy(data)
    tokens = client.infer("tokenizer", [text])
    feeds = []
    for name in ("input_ids", "attention_mask"):
        value = tokens.as_numpy(name)
        tensor = grpcclient.InferInput(name, list(value.shape), "INT64")
        tensor.set_data_from_numpy(value)
        feeds.append(tensor)
    return client.infer("encoder", feeds, timeout=SLOW_QUEUE_TIMEOUT_US)


def _served_encoder(triton: TritonServer, model: str) -> str:
    """Which encoder ``model`` serves, from its ``modstream_model_encoder`` gauge on Triton's
    metrics endpoint (``cpu`` or ``float32``; exactly one is 1)."""
    metrics_port = triton.settings.triton_metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
        text = reply.read().decode("utf-8")
    found = dict(
        re.findall(
            rf'^modstream_model_encoder{{encoder="(\w+)",model="{model}"}} ([0-9.]+)$', text, re.M
        )
    )
    assert set(found) == {CPU, FLOAT32}, text[-2000:]
    serving = [encoder for encoder, value in found.items() if float(value) == 1.0]
    assert len(serving) == 1, found
    return serving[0]


def _served_encode(
    client: grpcclient.InferenceServerClient,
    texts: list[str],
    encoder: str,
    model: str = "moderation_v1",
) -> dict[str, Array]:
    """The ``tokenizer`` model, then the encoder file ``model`` serves here (its CPU file or its
    float32 one) in process, in the served model's length groups."""
    data = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
    text = grpcclient.InferInput("TEXT", list(data.shape), "BYTES")
    text.set_data_from_numpy(data)
    tokens = client.infer("tokenizer", [text])
    ids, mask = tokens.as_numpy("input_ids"), tokens.as_numpy("attention_mask")
    name = ENCODERS[model][encoder]
    session = ort.InferenceSession(
        str(REPOSITORY / "encoder" / "1" / name),
        providers=["CPUExecutionProvider"],
        disabled_optimizers=list(ENCODER_UNFUSED),
    )
    width = int(session.get_outputs()[1].shape[1])  # features
    features = np.zeros((len(texts), width), dtype=np.float32)
    for rows in _length_chunks(mask, 16):
        chunk = _trim(mask[rows])
        feed = {"input_ids": ids[rows, : chunk.shape[1]], "attention_mask": chunk}
        features[rows] = session.run(["features"], feed)[0]
    hidden = int(session.get_outputs()[0].shape[1])  # embedding
    return {"features": features, "embedding": features[:, -hidden:]}


def _embedding_input(embedding: Array) -> grpcclient.InferInput:
    vec = grpcclient.InferInput("embedding", list(embedding.shape), "FP32")
    vec.set_data_from_numpy(np.ascontiguousarray(embedding))
    return vec


def _composing_steps(
    client: grpcclient.InferenceServerClient,
    texts: list[str],
    model: str,
    encoder: str,
) -> dict[str, Array]:
    """The former ensemble by hand: tokenizer, encoder, then each head, one call after another.
    The encoder is the file the moderation model serves here (run in process in its length
    groups); heads served alone are called on Triton; the features heads (not served alone: they
    read the encoder's features and VADER's scores) and the served model's own heads run their
    committed files with onnxruntime."""
    encoded = _served_encode(client, texts, encoder, model)
    vec = _embedding_input(encoded["embedding"])
    out = {}
    for output, head in HEADS[model].items():
        if head.endswith(".onnx"):
            session = ort.InferenceSession(
                str(REPOSITORY / head), providers=["CPUExecutionProvider"]
            )
            out[output] = session.run(["probabilities"], {"embedding": encoded["embedding"]})[0]
            continue
        name, version = head.split("/")
        if head in FEATURE_HEADS:
            lexicon = lexicon_scores(SentimentIntensityAnalyzer(), texts)
            session = ort.InferenceSession(
                str(REPOSITORY / head / "model.onnx"), providers=["CPUExecutionProvider"]
            )
            feed = {"features": np.hstack([encoded["features"], lexicon])}
            out[output] = session.run(["probabilities"], feed)[0]
        else:
            result = client.infer(name, [vec], model_version=version)
            out[output] = result.as_numpy("probabilities")
    return out


def _chat_lines(n: int) -> list[str]:
    """n distinct chat-like lines of mixed length and language."""
    base = [*ABUSE["en"], *ABUSE["zh"], *PRAISE["en"], *PRAISE["zh"]]
    return [f"{base[i % len(base)]} {'lol ' * (i % 13)}#{i}" for i in range(n)]


def _model_dirs() -> list[tuple[str, str]]:
    """Every (model, version) folder its config serves: all of them, or those a ``specific``
    version policy lists."""
    pairs = []
    for config in sorted(REPOSITORY.glob("*/config.pbtxt")):
        versions = sorted(p.name for p in config.parent.iterdir() if p.name.isdigit())
        policy = re.search(r"specific: \{ versions: \[([\d, ]+)\] \}", config.read_text())
        if policy is not None:
            versions = [v for v in versions if v in policy.group(1).replace(",", " ").split()]
        pairs.extend((config.parent.name, version) for version in versions)
    return pairs


def test_every_model_and_version_in_the_repository_is_ready(
    client: grpcclient.InferenceServerClient,
) -> None:
    """Triton loads the whole repository: every model folder and every version folder its
    config serves."""
    pairs = _model_dirs()
    assert ("toxicity", "1") in pairs
    assert ("toxicity", "2") in pairs
    assert ("sentiment", "2") not in pairs  # read by moderation in process, not served alone
    not_ready = [(m, v) for m, v in pairs if not client.is_model_ready(m, v)]
    assert not_ready == []


@pytest.mark.parametrize("model", MODERATION_MODELS)
def test_moderation_metadata_matches_the_contract(
    client: grpcclient.InferenceServerClient, model: str
) -> None:
    """Input TEXT (BYTES, [-1, 1]), the three outputs with the contract's widths (and, for a
    model that has it, HARMS with its five), batch >= 128, served by one Python-backend model
    with its own dynamic batcher (not a Triton ensemble)."""
    meta = client.get_model_metadata(model, as_json=True)
    inputs = {i["name"]: i for i in meta["inputs"]}
    assert inputs[MODEL_INPUT]["datatype"] == "BYTES"
    assert [int(d) for d in inputs[MODEL_INPUT]["shape"]] == [-1, 1]
    outputs = {o["name"]: [int(d) for d in o["shape"]] for o in meta["outputs"]}
    harms = outputs.pop(HARMS_OUTPUT, None)
    assert harms in (None, [-1, len(HARM_LABELS)])
    assert outputs == {name: [-1, len(labels)] for name, labels in MODEL_OUTPUTS.items()}
    config = client.get_model_config(model, as_json=True)["config"]
    assert int(config["max_batch_size"]) >= 128
    assert config["backend"] == "python"
    assert "ensemble_scheduling" not in config
    assert "dynamic_batching" in config


def test_label_files_follow_the_contract_order() -> None:
    """Each moderation folder and head folder writes the label order pipelines.scores expects;
    a moderation model that declares HARMS names ``harms_labels.txt`` with the harms' order."""
    for model in MODERATION_MODELS:
        for name, labels in MODEL_OUTPUTS.items():
            path = REPOSITORY / model / f"{name.lower()}_labels.txt"
            assert tuple(path.read_text().split()) == labels
        declared = read_model_config(REPOSITORY / model / "config.pbtxt").get("output", [])
        for output in declared:
            if output["name"] == HARMS_OUTPUT:
                assert output["label_filename"] == "harms_labels.txt"
                path = REPOSITORY / model / "harms_labels.txt"
                assert tuple(path.read_text().split()) == HARM_LABELS
    for head, name in (("sentiment", "SENTIMENT"), ("intent", "INTENT"), ("toxicity", "TOXICITY")):
        assert tuple((REPOSITORY / head / "labels.txt").read_text().split()) == MODEL_OUTPUTS[name]


@pytest.mark.parametrize("model", MODERATION_MODELS)
def test_english_and_chinese_rows_satisfy_the_contract(
    client: grpcclient.InferenceServerClient, model: str
) -> None:
    """A mixed batch gets one valid row per message and task (validated by ModelScores)."""
    texts = [
        "hi everyone, how is the stream going?",
        "大家好，今天玩什么游戏？",
        "",
        "x" * 2000,
        *ABUSE["en"],
        *PRAISE["zh"],
    ]
    out = _infer(client, texts, model)
    for name, labels in MODEL_OUTPUTS.items():
        assert out[name].shape == (len(texts), len(labels))
        assert out[name].dtype == np.float32
    for i in range(len(texts)):
        ModelScores(
            sentiment=tuple(float(v) for v in out["SENTIMENT"][i]),
            intent=tuple(float(v) for v in out["INTENT"][i]),
            toxicity=tuple(float(v) for v in out["TOXICITY"][i]),
            harms=tuple(float(v) for v in out[HARMS_OUTPUT][i]) if HARMS_OUTPUT in out else None,
        )
    assert (HARMS_OUTPUT in out) == (model == "moderation")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_clear_abuse_scores_more_toxic_than_clear_praise(
    client: grpcclient.InferenceServerClient, lang: str
) -> None:
    """P(toxic) = 1 - P(none) is higher for every abusive line than for every praising one."""
    abuse = 1.0 - _infer(client, ABUSE[lang])["TOXICITY"][:, 0]
    praise = 1.0 - _infer(client, PRAISE[lang])["TOXICITY"][:, 0]
    assert float(abuse.min()) > float(praise.max())
    praise_sentiment = _infer(client, PRAISE[lang])["SENTIMENT"]
    assert (praise_sentiment.argmax(axis=1) == 2).all()


def test_pinned_old_toxicity_differs_from_latest(
    client: grpcclient.InferenceServerClient,
) -> None:
    """moderation_v1 (sentiment 1, intent 1, toxicity 1) answers differently from moderation
    (sentiment 2, intent 2, toxicity 3) on every output."""
    texts = [*ABUSE["en"], *PRAISE["en"], *ABUSE["zh"]]
    latest = _infer(client, texts, "moderation")
    pinned = _infer(client, texts, "moderation_v1")
    for name in MODEL_OUTPUTS:
        assert float(np.abs(latest[name] - pinned[name]).max()) > 1e-3, name


def test_head_versions_can_be_addressed_directly(
    triton: TritonServer, client: grpcclient.InferenceServerClient
) -> None:
    """Both embedding toxicity versions are served at once; fed the encoder's embedding of the
    same messages they answer differently, and version 1 matches moderation_v1, which pins it."""
    texts = [*ABUSE["en"], *ABUSE["zh"]]
    encoder = _served_encoder(triton, "moderation_v1")
    vec = _embedding_input(_served_encode(client, texts, encoder, "moderation_v1")["embedding"])
    one = client.infer("toxicity", [vec], model_version="1").as_numpy("probabilities")
    two = client.infer("toxicity", [vec], model_version="2").as_numpy("probabilities")
    assert one.shape == two.shape == (len(texts), 3)
    assert float(np.abs(one - two).max()) > 1e-3
    assert np.allclose(one, _infer(client, texts, "moderation_v1")["TOXICITY"], atol=1e-5)


@pytest.mark.parametrize("model", MODERATION_MODELS)
def test_moderation_equals_its_composing_models(
    triton: TritonServer, client: grpcclient.InferenceServerClient, model: str
) -> None:
    """On a mixed batch (empty, very long, en, zh, short and long lines) every output equals the
    tokenizer -> encoder -> heads chain called step by step within 1e-5 (as the ensemble did),
    with the encoder the model says it serves."""
    texts = ["", "x" * 2000, "大家好", *_chat_lines(37)]
    got = _infer(client, texts, model, queue_timeout_us=SLOW_QUEUE_TIMEOUT_US)
    want = _composing_steps(client, texts, model, _served_encoder(triton, model))
    assert set(got) == set(want)
    for name in want:
        assert got[name].shape == want[name].shape
        assert float(np.abs(got[name] - want[name]).max()) <= 1e-5, name


def test_concurrent_requests_are_all_answered_and_the_server_stays_up(
    triton: TritonServer, client: grpcclient.InferenceServerClient
) -> None:
    """8 requests of 100 messages at once (the ensemble segfaulted Triton on this) each get
    their own 100 valid rows, equal to the same messages sent alone within 1e-5 whatever the
    dynamic batcher merged them with; the server stays healthy."""
    texts = _chat_lines(800)
    batches = [texts[i * 100 : (i + 1) * 100] for i in range(8)]

    def send(batch: list[str]) -> dict[str, Array]:
        own = grpcclient.InferenceServerClient(triton.endpoint)
        try:
            return _infer(own, batch, queue_timeout_us=SLOW_QUEUE_TIMEOUT_US)
        finally:
            own.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(send, batches))
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("moderation", "1")
    assert "Signal (" not in triton.log_path.read_text(errors="replace")
    for result in results:
        for name, labels in MODEL_OUTPUTS.items():
            assert result[name].shape == (100, len(labels))
            assert np.allclose(result[name].sum(axis=1), 1.0, atol=1e-4)
        assert result[HARMS_OUTPUT].shape == (100, len(HARM_LABELS))
    alone = _infer(client, batches[5], queue_timeout_us=SLOW_QUEUE_TIMEOUT_US)
    for name in alone:
        # Neither encoder has a scale that depends on the batch (the CPU one: fixed or per
        # token), so only float rounding differs between length groups.
        assert float(np.abs(results[5][name] - alone[name]).max()) <= 1e-5


def test_float32_encoder_model_agrees_with_the_cpu_encoder(
    client: grpcclient.InferenceServerClient,
) -> None:
    """The ``encoder`` model (float32 ``model.onnx``, what a GPU runs) and the CPU file give
    the same features within 2e-3 (about 15 significant bits per product) for every message."""
    texts = ["", "大家好", *_chat_lines(30)]
    fp32 = _encode(client, texts).as_numpy("features")
    cpu = _served_encode(client, texts, CPU, "moderation_v1")["features"]
    gap = float(np.abs(fp32 - cpu).max())
    assert 0 < gap <= 2e-3


@pytest.mark.parametrize("model", MODERATION_MODELS)
def test_each_moderation_model_says_which_encoder_it_serves(
    triton: TritonServer, model: str
) -> None:
    """At load each moderation model checked the CPU encoder on its probes and logged the
    choice; its gauges say which encoder serves and, for the CPU one, that it was within 0.02
    of float32 and faster. On this repository's CPU encoder the check passes on accuracy."""
    encoder = _served_encoder(triton, model)
    port = triton.settings.triton_metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode("utf-8")
    found = re.search(
        rf'^modstream_model_encoder_deviation{{model="{model}"}} ([0-9.e-]+)$', text, re.M
    )
    assert found is not None
    assert float(found.group(1)) <= 0.02
    speed = re.search(
        rf'^modstream_model_encoder_speedup{{model="{model}"}} ([0-9.e-]+)$', text, re.M
    )
    assert speed is not None
    # Triton writes the model's log line as a quoted string after the source location.
    chosen = [
        json.loads(json.loads(line.split("] ", 1)[1]))
        for line in triton.log_path.read_text(errors="replace").splitlines()
        if "encoder_chosen" in line
    ]
    mine = [entry for entry in chosen if entry["model"] == model]
    assert mine, "no encoder_chosen line for the model in the Triton log"
    assert mine[-1]["encoder"] == encoder
    assert mine[-1]["probes"] >= 100
    if encoder == CPU:
        assert float(speed.group(1)) >= 1.05
    else:
        assert mine[-1]["reason"].startswith("speed-up")
