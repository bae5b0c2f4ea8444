"""``modelbuild/serving/pipeline_model.py`` (the in-process moderation model) on tiny files, run
against a stand-in for Triton's ``pb_utils``; and the repository configs that use it."""

from __future__ import annotations

import importlib
import json
import re
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

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
from pipelines.scores import HARM_LABELS

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


class _Logger:
    lines: ClassVar[list[tuple[str, str]]] = []

    @classmethod
    def log_info(cls, line: str) -> None:
        cls.lines.append(("info", line))

    @classmethod
    def log_warn(cls, line: str) -> None:
        cls.lines.append(("warn", line))


class _Metric:
    def __init__(self, family: _MetricFamily, labels: dict[str, str]) -> None:
        self.family = family
        self.labels = labels
        self.value: float | None = None

    def set(self, value: float) -> None:
        self.value = value


class _MetricFamily:
    GAUGE = "gauge"
    made: ClassVar[list[_MetricFamily]] = []

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        self.metrics: list[_Metric] = []
        _MetricFamily.made.append(self)

    def Metric(self, labels: dict[str, str]) -> _Metric:  # noqa: N802 - Triton's spelling
        metric = _Metric(self, labels)
        self.metrics.append(metric)
        return metric


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    fake = types.ModuleType("triton_python_backend_utils")
    fake.Tensor = _Tensor  # type: ignore[attr-defined]
    fake.InferenceResponse = _Response  # type: ignore[attr-defined]
    fake.get_input_tensor_by_name = (  # type: ignore[attr-defined]
        lambda request, name: _Tensor(name, request.text)
    )
    fake.Logger = _Logger  # type: ignore[attr-defined]
    fake.MetricFamily = _MetricFamily  # type: ignore[attr-defined]
    _Logger.lines.clear()
    _MetricFamily.made.clear()
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
        build_cpu_encoder(read_e5(root / "e5.bin"), (1,)), root / "encoder" / "1" / "model_cpu.onnx"
    )
    # A CPU encoder from other weights: far off the float32 one (the check must refuse it).
    write_tiny_e5(root / "other.bin", seed=1)
    save_encoder(
        build_cpu_encoder(read_e5(root / "other.bin"), (1,)), root / "encoder" / "1" / "wrong.onnx"
    )
    probes = ["hello", "a b great", "b a b awful", "hello a hello", "", "a " * 20, "love b"]
    (root / "encoder" / "probes.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in probes), encoding="utf-8"
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


CPU_ENCODER = {
    "cpu_encoder_file": "../encoder/1/model_cpu.onnx",
    "probe_file": "../encoder/probes.jsonl",
    "cpu_encoder_min_speedup": "0",
}


def _serving_gauges() -> dict[str, float | None]:
    """The serving gauge of the first model loaded in the test."""
    family = next(f for f in _MetricFamily.made if f.name == "modstream_model_encoder")
    return {m.labels["encoder"]: m.value for m in family.metrics}


def test_a_cpu_encoder_within_the_bound_is_served_and_said(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """With a CPU encoder that its probes show within the bound (speed not required here), a
    CPU instance serves it: close to float32 but not equal; the choice is logged (no message
    text) and the serving gauge says cpu."""
    cpu = _load(pipeline, repository, **CPU_ENCODER)
    fp32 = _load(pipeline, repository)
    assert cpu.choice.encoder == pipeline.CPU
    assert cpu.encoder_path == (repository / "encoder" / "1" / "model_cpu.onnx").resolve()
    assert fp32.encoder_path == (repository / "encoder" / "1" / "model.onnx").resolve()
    assert fp32.choice.reason == "no cpu_encoder_file configured"
    assert 0 < cpu.choice.max_deviation <= 0.02
    assert cpu.choice.probes == 7
    texts = ["hello", "a b great", "b a b awful", "hello a hello"]
    got, want = cpu.scores(texts), fp32.scores(texts)
    for name in WIDTHS:
        assert not np.array_equal(got[name], want[name])
        assert float(np.abs(got[name] - want[name]).max()) <= 0.02
    level, line = next(entry for entry in _Logger.lines if "encoder_chosen" in entry[1])
    assert level == "info"
    assert json.loads(line)["encoder"] == "cpu"
    assert "great" not in line
    gauges = _serving_gauges()
    assert gauges["cpu"] == 1.0


def test_a_cpu_encoder_off_the_bound_is_refused_and_float32_served(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """A CPU encoder whose probabilities are off float32's by more than the bound (here one from
    other weights) is refused: the instance serves float32, exactly, and warns why."""
    wrong = {**CPU_ENCODER, "cpu_encoder_file": "../encoder/1/wrong.onnx"}
    model = _load(pipeline, repository, **wrong)
    assert model.choice.encoder == pipeline.FLOAT32
    assert "exceeds 0.02" in model.choice.reason
    assert model.choice.max_deviation > 0.02
    assert model.encoder_path == (repository / "encoder" / "1" / "model.onnx").resolve()
    texts = ["hello", "b a b awful"]
    fp32 = _load(pipeline, repository).scores(texts)
    for name, rows in model.scores(texts).items():
        assert np.array_equal(rows, fp32[name])
    assert any(level == "warn" and "exceeds" in line for level, line in _Logger.lines)
    assert _serving_gauges()["float32"] == 1.0
    assert _serving_gauges()["cpu"] == 0.0


def test_a_cpu_encoder_that_is_not_faster_keeps_float32(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """A required speed-up the CPU encoder cannot show keeps float32, with the measured
    speed-up in the reason; a missing CPU file serves float32 too."""
    slow = _load(pipeline, repository, **{**CPU_ENCODER, "cpu_encoder_min_speedup": "1000"})
    assert slow.choice.encoder == pipeline.FLOAT32
    assert slow.choice.reason.startswith("speed-up")
    assert slow.choice.speedup is not None
    gone = _load(pipeline, repository, **{**CPU_ENCODER, "cpu_encoder_file": "../encoder/9.onnx"})
    assert gone.choice.encoder == pipeline.FLOAT32
    assert "not found" in gone.choice.reason


def test_cpu_encoder_settings_are_checked_at_load(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """A CPU encoder without a probe file, an empty or missing probe file, or a bound that is
    not a number fail to load (a configuration mistake is not silently served)."""
    without = {k: v for k, v in CPU_ENCODER.items() if k != "probe_file"}
    with pytest.raises(pipeline.PipelineConfigError, match="probe_file"):
        _load(pipeline, repository, **without)
    with pytest.raises(pipeline.PipelineConfigError, match="probe file not found"):
        _load(pipeline, repository, **{**CPU_ENCODER, "probe_file": "../nope.jsonl"})
    (repository / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(pipeline.PipelineConfigError, match="no messages"):
        _load(pipeline, repository, **{**CPU_ENCODER, "probe_file": "../empty.jsonl"})
    with pytest.raises(pipeline.PipelineConfigError, match="cpu_encoder_max_deviation"):
        _load(pipeline, repository, **{**CPU_ENCODER, "cpu_encoder_max_deviation": "loose"})


def test_cpu_encoder_scores_do_not_depend_on_the_batch(
    pipeline: types.ModuleType, repository: Path
) -> None:
    """Served by a CPU instance, a message scores the same alone and in a batch of others
    (different length groups and padding) within 1e-6; an empty batch gives empty rows."""
    cpu = _load(pipeline, repository, **CPU_ENCODER, chunk_rows="2")
    assert cpu.choice.encoder == pipeline.CPU
    texts = ["hello", "a b great", "b a b awful b a b awful", "hello a hello", "great"]
    together = cpu.scores(texts)
    for row, text in enumerate(texts):
        alone = cpu.scores([text])
        for name in WIDTHS:
            assert float(np.abs(alone[name][0] - together[name][row]).max()) <= 1e-6
    assert {name: rows.shape[0] for name, rows in cpu.scores([]).items()} == dict.fromkeys(
        WIDTHS, 0
    )


def test_choose_encoder_takes_the_worst_probability_and_the_cpu_time(
    pipeline: types.ModuleType,
) -> None:
    """The choice compares every output over every probe (the worst gap decides) and counts
    top-class changes; a CPU side that spends more CPU time than required is refused."""
    base = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]], dtype=np.float32)

    def float32(texts: list[str]) -> dict[str, Array]:
        return {"A": base[: len(texts)], "B": base[: len(texts)]}

    def shifted(texts: list[str]) -> dict[str, Array]:
        moved = base[: len(texts)].copy()
        moved[0] = [0.49, 0.51]  # 0.01 off, and the top class changes
        return {"A": base[: len(texts)], "B": moved}

    probes = ["x", "y", "z"]
    near = pipeline.choose_encoder(float32, shifted, probes, max_deviation=0.02, min_speedup=0)
    assert near.encoder == pipeline.CPU
    assert near.deviation_output == "B"
    assert near.max_deviation == pytest.approx(0.01, abs=1e-6)
    assert near.top_class_changes == 1
    far = pipeline.choose_encoder(float32, shifted, probes, max_deviation=0.005, min_speedup=0)
    assert far.encoder == pipeline.FLOAT32

    def slow(texts: list[str]) -> dict[str, Array]:
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        return float32(texts)

    refused = pipeline.choose_encoder(float32, slow, probes, min_speedup=1.05)
    assert refused.encoder == pipeline.FLOAT32
    assert refused.speedup is not None
    assert refused.speedup < 1.05


def _parameters(model: str) -> dict[str, str]:
    text = (REPOSITORY / model / "config.pbtxt").read_text()
    return dict(re.findall(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}', text))


def test_the_served_model_reads_the_tuned_encoder_and_its_own_heads() -> None:
    """``moderation`` reads the fine-tuned encoder the build writes from the committed delta,
    its own committed heads (HARMS included) and tokenizes like the tokenizer model."""
    params = _parameters("moderation")
    tokenizer = _parameters("tokenizer")
    assert (params["max_length"], params["prefix"]) == (
        tokenizer["max_length"],
        tokenizer["prefix"],
    )
    assert params["encoder_file"] == "../encoder/1/tuned.onnx"
    assert params["cpu_encoder_file"] == "../encoder/1/tuned_cpu.onnx"
    assert params["probe_file"] == "../encoder/probes.jsonl"
    for task in ("sentiment", "intent", "toxicity", "harms"):
        assert params[f"{task}_file"] == f"heads/{task}.onnx"
        assert (REPOSITORY / "moderation" / params[f"{task}_file"]).is_file()
    config = (REPOSITORY / "moderation" / "config.pbtxt").read_text()
    assert (
        '{ name: "HARMS" data_type: TYPE_FP32 dims: [ 5 ] label_filename: "harms_labels.txt" }'
        in (config)
    )
    labels = (REPOSITORY / "moderation" / "harms_labels.txt").read_text().split()
    assert tuple(labels) == HARM_LABELS


@pytest.mark.parametrize(
    ("model", "sentiment", "intent", "toxicity"),
    [("moderation_v2", "2", "2", "3"), ("moderation_v1", "1", "1", "1")],
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
    assert params["probe_file"] == "../encoder/probes.jsonl"
    assert (params["cpu_encoder_max_deviation"], params["cpu_encoder_min_speedup"]) == (
        "0.02",
        "1.05",
    )
    assert (REPOSITORY / model / params["probe_file"]).resolve().is_file()
    assert params["tokenizer_file"] == "../tokenizer/1/tokenizer.json"
    assert params["toxicity_file"] == f"../toxicity/{toxicity}/model.onnx"
    assert params["sentiment_file"] == f"../sentiment/{sentiment}/model.onnx"
    assert params["intent_file"] == f"../intent/{intent}/model.onnx"
    for key in ("sentiment_file", "intent_file", "toxicity_file"):
        assert (REPOSITORY / model / params[key]).resolve().is_file()
    assert 'backend: "python"' in (REPOSITORY / model / "config.pbtxt").read_text()


def test_build_installs_the_pipeline_source_into_both_models(tmp_path: Path) -> None:
    """The build copies pipeline_model.py as model.py into every moderation model's folder."""
    paths = BuildPaths(tmp_path / "model_repository", tmp_path / "cache", tmp_path / "work")
    _install_serving_code(paths)
    source = (project_root() / "modelbuild" / "serving" / "pipeline_model.py").read_bytes()
    assert PIPELINE_MODELS == ("moderation", "moderation_v2", "moderation_v1")
    for name in PIPELINE_MODELS:
        assert (paths.repository / name / "1" / "model.py").read_bytes() == source
    # Heads served alone get the ONNX runner; sentiment 2 (features input) is read in place only.
    assert (paths.repository / "sentiment" / "1" / "model.py").is_file()
    assert not (paths.repository / "sentiment" / "2" / "model.py").exists()
