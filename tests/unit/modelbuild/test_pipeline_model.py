"""``modelbuild/serving/pipeline_model.py`` (the in-process moderation model) on tiny files, run
against a stand-in for Triton's ``pb_utils``; and the repository configs that use it."""

from __future__ import annotations

import importlib
import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from tiny_e5 import HIDDEN, write_tiny_e5
from tokenizers import Tokenizer, models, pre_tokenizers
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from common.settings import project_root
from modelbuild.build import PIPELINE_MODELS, BuildPaths, _install_serving_code
from modelbuild.cpu_encoder import build_cpu_encoder
from modelbuild.e5_weights import read_e5
from modelbuild.embedding import Embedder
from modelbuild.encoder_graph import build_encoder, save_encoder
from modelbuild.head_inputs import HeadInputs
from modelbuild.heads import HEAD_FEATURES_INPUT, HEAD_INPUT, Dense, Head, save_head

Array = np.ndarray[Any, Any]
REPOSITORY = project_root() / "model_repository"
WIDTHS = {"SENTIMENT": 3, "INTENT": 4, "TOXICITY": 3}
HEAD_FOLDERS = {"SENTIMENT": "sentiment/2", "INTENT": "intent/2", "TOXICITY": "toxicity/3"}
# In this tiny repository only sentiment reads the encoder's features + VADER scores, so both
# kinds of head are exercised (the real moderation model's intent and toxicity read features too).
FEATURE_HEADS = {"SENTIMENT"}
FEATURES_WIDTH = 2 * HIDDEN + 4  # the tiny encoder pools block 1 and the embedding
# Word-level vocabulary whose ids are the tiny e5 model's pieces (0..9).
VOCAB = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "query": 4, "a": 5, "b": 6, "hello": 7}
# Words VADER scores (they are unknown to the tiny vocabulary, so only the lexicon sees them).
WORDS = ["great", "awful", "love", "hate", "fine"]
MAX_LENGTH = 12


class _Tensor:
    def __init__(self, name: str, value: Array) -> None:
        self.name = name
        self.value = value

    def as_numpy(self) -> Array:
        return self.value


class _Response:
    def __init__(self, output_tensors: list[_Tensor]) -> None:
        self.outputs = {t.name: t.value for t in output_tensors}


class _Request:
    def __init__(self, texts: list[bytes]) -> None:
        self.text = np.array([[t] for t in texts], dtype=object)


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    fake = types.ModuleType("triton_python_backend_utils")
    fake.Tensor = _Tensor  # type: ignore[attr-defined]
    fake.InferenceResponse = _Response  # type: ignore[attr-defined]
    fake.get_input_tensor_by_name = (  # type: ignore[attr-defined]
        lambda request, name: _Tensor(name, request.text)
    )
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    yield importlib.reload(importlib.import_module("modelbuild.serving.pipeline_model"))
    sys.modules.pop("modelbuild.serving.pipeline_model", None)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with a word-level tokenizer, the tiny e5 encoder and three random heads."""
    root = tmp_path_factory.mktemp("repo")
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    (root / "tokenizer" / "1").mkdir(parents=True)
    tok.save(str(root / "tokenizer" / "1" / "tokenizer.json"))
    write_tiny_e5(root / "e5.bin")
    save_encoder(
        build_encoder(read_e5(root / "e5.bin"), (1,)), root / "encoder" / "1" / "model.onnx"
    )
    save_encoder(
        build_cpu_encoder(read_e5(root / "e5.bin"), (1,))[1],
        root / "encoder" / "1" / "model_cpu.onnx",
    )
    rng = np.random.default_rng(7)
    for output, folder in HEAD_FOLDERS.items():
        features = output in FEATURE_HEADS
        weight = rng.normal(size=(FEATURES_WIDTH if features else HIDDEN, WIDTHS[output]))
        bias = rng.normal(size=WIDTHS[output]).astype(np.float32)
        save_head(
            Head((Dense(weight.astype(np.float32) * 3, bias),)),
            output.lower(),
            root / folder / "model.onnx",
            HEAD_FEATURES_INPUT if features else HEAD_INPUT,
        )
    (root / "moderation" / "1").mkdir(parents=True)
    return root


def _config(**params: str) -> str:
    defaults = {
        "max_length": str(MAX_LENGTH),
        "prefix": "query: ",
        "tokenizer_file": "../tokenizer/1/tokenizer.json",
        "encoder_file": "../encoder/1/model.onnx",
        **{f"{o.lower()}_file": f"../{f}/model.onnx" for o, f in HEAD_FOLDERS.items()},
    }
    defaults.update(params)
    return json.dumps(
        {
            "output": [
                {"name": n, "data_type": "TYPE_FP32", "dims": [w]} for n, w in WIDTHS.items()
            ],
            "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
            "parameters": {k: {"string_value": v} for k, v in defaults.items()},
        }
    )


def _load(pipeline: types.ModuleType, repository: Path, **params: str) -> Any:
    model = pipeline.TritonPythonModel()
    model.initialize(
        {
            "model_config": _config(**params),
            "model_repository": str(repository / "moderation"),
            "model_version": "1",
        }
    )
    return model


def _composing_steps(repository: Path, texts: list[str]) -> dict[str, Array]:
    """What the former ensemble computed: fixed-length tokens, one encoder run over the whole
    batch without its all-padding columns, then each head on the embedding."""
    tok = Tokenizer.from_file(str(repository / "tokenizer" / "1" / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_LENGTH)
    tok.enable_padding(pad_id=1, pad_token="<pad>", length=MAX_LENGTH)
    encodings = tok.encode_batch(["query: " + t for t in texts])
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    length = int(np.flatnonzero(mask.any(axis=0))[-1]) + 1
    cpu = ["CPUExecutionProvider"]
    encoder = ort.InferenceSession(str(repository / "encoder" / "1" / "model.onnx"), providers=cpu)
    embedding, features = encoder.run(
        ["embedding", "features"],
        {"input_ids": ids[:, :length], "attention_mask": mask[:, :length]},
    )
    analyzer = SentimentIntensityAnalyzer()
    lexicon = np.array(
        [
            [analyzer.polarity_scores(t)[k] for k in ("compound", "pos", "neg", "neu")]
            for t in texts
        ],
        dtype=np.float32,
    )
    out = {}
    for output, folder in HEAD_FOLDERS.items():
        head = ort.InferenceSession(str(repository / folder / "model.onnx"), providers=cpu)
        if output in FEATURE_HEADS:
            feed = {"features": np.hstack([features, lexicon])}
        else:
            feed = {"embedding": embedding}
        out[output] = head.run(["probabilities"], feed)[0]
    return out


def test_pipeline_equals_the_composing_steps_and_splits_per_request(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """Two requests with messages of very different lengths (so length chunks of 2 rows differ
    from the one padded batch) get their own rows, equal to tokenizer -> encoder -> heads run
    one after another within 1e-5, each row a softmax."""
    first = ["hello", "a b a b a b a b a b a b a b", "b great"]
    second = ["hello a", "", "a love a", "awful words here", "b hello b hello hate"]
    model = _load(pipeline, repository, chunk_rows="2")
    responses = model.execute(
        [_Request([t.encode() for t in first]), _Request([t.encode() for t in second])]
    )
    want = _composing_steps(repository, first + second)
    for name, width in WIDTHS.items():
        assert [r.outputs[name].shape for r in responses] == [(3, width), (5, width)]
        got = np.concatenate([r.outputs[name] for r in responses])
        assert got.dtype == np.float32
        assert float(np.abs(got - want[name]).max()) <= 1e-5
        assert np.allclose(got.sum(axis=1), 1.0, atol=1e-5)


def test_features_heads_see_the_lexicon_scores(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """Words outside the tiny vocabulary (same encoder input) still move a features head, through
    VADER's scores; an embedding head cannot tell them apart."""
    model = _load(pipeline, repository)
    scores = model.scores(["a great", "a awful"])
    assert float(np.abs(scores["SENTIMENT"][0] - scores["SENTIMENT"][1]).max()) > 1e-3
    assert float(np.abs(scores["INTENT"][0] - scores["INTENT"][1]).max()) <= 1e-6
    lexicon = pipeline.lexicon_scores(SentimentIntensityAnalyzer(), ["great", "awful", "b"])
    assert lexicon.shape == (3, 4)
    assert lexicon[0, 0] > 0 > lexicon[1, 0]
    assert lexicon[2].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_training_inputs_are_what_the_served_model_feeds(
    pipeline: types.ModuleType, repository: Path, tmp_path: Path
) -> None:
    """The build and the evaluation build a head's input with HeadInputs; fed to the same head
    files it gives the served model's rows, for both kinds of head."""
    texts = ["hello great", "a b awful", "b"]
    inputs = HeadInputs(
        Embedder(
            repository / "encoder" / "1" / "model.onnx",
            repository / "tokenizer" / "1" / "tokenizer.json",
            tmp_path / "cache",
        )
    )
    served = _load(pipeline, repository).scores(texts)
    cpu = ["CPUExecutionProvider"]
    for output, folder in HEAD_FOLDERS.items():
        name = HEAD_FEATURES_INPUT if output in FEATURE_HEADS else HEAD_INPUT
        x = inputs.matrix(name, texts)
        assert x.shape == (3, FEATURES_WIDTH if output in FEATURE_HEADS else HIDDEN)
        head = ort.InferenceSession(str(repository / folder / "model.onnx"), providers=cpu)
        (probs,) = head.run(["probabilities"], {name: x})
        assert float(np.abs(probs - served[output]).max()) <= 1e-5, output
    with pytest.raises(ValueError, match="unknown head input"):
        inputs.matrix("tokens", texts)


def test_a_head_with_an_unknown_input_fails_at_load(
    pipeline: types.ModuleType, repository: Path
) -> None:
    head = Head((Dense(np.zeros((HIDDEN, 3), np.float32), np.zeros(3, np.float32)),))
    save_head(head, "odd", repository / "odd" / "1" / "model.onnx", "tokens")
    with pytest.raises(pipeline.PipelineConfigError, match="head input"):
        _load(pipeline, repository, toxicity_file="../odd/1/model.onnx")


def test_invalid_utf8_is_replaced_not_rejected(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """Bytes that are not UTF-8 still get a valid row (decoded with replacement)."""
    model = _load(pipeline, repository)
    (response,) = model.execute([_Request([b"\xff\xfe hello", b"a"])])
    assert response.outputs["TOXICITY"].shape == (2, 3)
    assert np.isfinite(response.outputs["TOXICITY"]).all()


def test_missing_file_or_parameter_fails_at_load(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """A config naming a file that is not there, or lacking a file parameter, fails to load."""
    with pytest.raises(pipeline.PipelineConfigError, match="not found"):
        _load(pipeline, repository, toxicity_file="../toxicity/9/model.onnx")
    config = json.loads(_config())
    del config["parameters"]["encoder_file"]
    model = pipeline.TritonPythonModel()
    with pytest.raises(pipeline.PipelineConfigError, match="encoder_file"):
        model.initialize(
            {
                "model_config": json.dumps(config),
                "model_repository": str(repository / "moderation"),
                "model_version": "1",
            }
        )


def test_length_chunks_group_similar_lengths(pipeline: types.ModuleType) -> None:
    """Rows are grouped shortest first, every row exactly once, at most ``rows`` per group."""
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    chunks = pipeline._length_chunks(mask, 2)
    assert [c.tolist() for c in chunks] == [[1, 4], [3, 0], [2]]
    assert pipeline._trim(mask[[1, 4]]).shape == (2, 1)


def test_cpu_instances_run_the_int8_encoder_when_configured(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """On CPU the model runs ``cpu_encoder_file`` when the config names it, else
    ``encoder_file``; with CUDA it always runs ``encoder_file``. Both give close probabilities."""
    encoders = repository / "encoder" / "1"
    cpu = _load(pipeline, repository, cpu_encoder_file="../encoder/1/model_cpu.onnx")
    fp32 = _load(pipeline, repository)
    assert cpu.encoder_path == (encoders / "model_cpu.onnx").resolve()
    assert fp32.encoder_path == (encoders / "model.onnx").resolve()
    texts = ["hello", "a b great", "b a b awful", "hello a hello"]
    got, want = cpu.scores(texts), fp32.scores(texts)
    for name in WIDTHS:
        assert not np.array_equal(got[name], want[name])
        assert float(np.abs(got[name] - want[name]).max()) <= 0.1
    params = {"encoder_file": "fp32", "cpu_encoder_file": "int8"}
    cuda = [("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"]
    assert pipeline._encoder_key(params, ["CPUExecutionProvider"]) == "cpu_encoder_file"
    assert pipeline._encoder_key(params, cuda) == "encoder_file"
    assert pipeline._encoder_key({"encoder_file": "fp32"}, ["CPUExecutionProvider"]) == (
        "encoder_file"
    )


def test_int8_scores_do_not_depend_on_the_batch(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """The int8 encoder quantises activations per run; with ``per_message`` it runs each message
    alone, so a message scores the same alone and in any batch (grouped, the default, it does
    not). ``per_message`` must be a boolean."""
    cpu = _load(
        pipeline, repository, cpu_encoder_file="../encoder/1/model_cpu.onnx", per_message="true"
    )
    texts = ["hello", "a b great", "b a b awful b a b awful", "hello a hello", "great"]
    together = cpu.scores(texts)
    for row, text in enumerate(texts):
        alone = cpu.scores([text])
        for name in WIDTHS:
            assert np.array_equal(alone[name][0], together[name][row])
    assert {name: rows.shape[0] for name, rows in cpu.scores([]).items()} == dict.fromkeys(
        WIDTHS, 0
    )
    grouped = _load(pipeline, repository, cpu_encoder_file="../encoder/1/model_cpu.onnx")
    assert grouped._pool is None
    with pytest.raises(pipeline.PipelineConfigError, match="per_message"):
        _load(pipeline, repository, cpu_encoder_file="../encoder/1/model_cpu.onnx", per_message="x")


def _parameters(model: str) -> dict[str, str]:
    text = (REPOSITORY / model / "config.pbtxt").read_text()
    return dict(re.findall(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}', text))


@pytest.mark.parametrize(
    ("model", "sentiment", "intent", "toxicity"),
    [("moderation", "2", "2", "3"), ("moderation_v1", "1", "1", "1")],
)
def test_repository_configs_use_the_tokenizer_settings_and_pinned_files(
    model: str, sentiment: str, intent: str, toxicity: str
) -> None:
    """Each moderation model tokenizes like the tokenizer model, reads the encoder and tokenizer
    in place (no copy) and pins its head versions; the committed head files exist."""
    params = _parameters(model)
    tokenizer = _parameters("tokenizer")
    assert (params["max_length"], params["prefix"]) == (
        tokenizer["max_length"],
        tokenizer["prefix"],
    )
    assert params["encoder_file"] == "../encoder/1/model.onnx"
    assert params["cpu_encoder_file"] == "../encoder/1/model_cpu.onnx"
    assert params["tokenizer_file"] == "../tokenizer/1/tokenizer.json"
    assert params["toxicity_file"] == f"../toxicity/{toxicity}/model.onnx"
    assert params["sentiment_file"] == f"../sentiment/{sentiment}/model.onnx"
    assert params["intent_file"] == f"../intent/{intent}/model.onnx"
    for key in ("sentiment_file", "intent_file", "toxicity_file"):
        assert (REPOSITORY / model / params[key]).resolve().is_file()
    assert 'backend: "python"' in (REPOSITORY / model / "config.pbtxt").read_text()


def test_build_installs_the_pipeline_source_into_both_models(tmp_path: Path) -> None:
    """The build copies pipeline_model.py as model.py into moderation/1 and moderation_v1/1."""
    paths = BuildPaths(tmp_path / "model_repository", tmp_path / "cache", tmp_path / "work")
    _install_serving_code(paths)
    source = (project_root() / "modelbuild" / "serving" / "pipeline_model.py").read_bytes()
    assert PIPELINE_MODELS == ("moderation", "moderation_v1")
    for name in PIPELINE_MODELS:
        assert (paths.repository / name / "1" / "model.py").read_bytes() == source
    # Heads served alone get the ONNX runner; sentiment 2 (features input) is read in place only.
    assert (paths.repository / "sentiment" / "1" / "model.py").is_file()
    assert not (paths.repository / "sentiment" / "2" / "model.py").exists()
