"""The CPU encoder: the fused graph equals the reference, its int8 version stays close to it, and
the build writes it reproducibly next to the float32 encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from tiny_e5 import HIDDEN, write_tiny_e5
from tokenizers import Tokenizer, models, pre_tokenizers

from modelbuild.build import BuildPaths, _build_encoder
from modelbuild.cpu_encoder import MIN_COSINE, build_cpu_encoder, min_part_cosine
from modelbuild.e5_weights import E5Weights, read_e5
from modelbuild.encoder_graph import ENCODER_FEATURES, ENCODER_OUTPUT, build_encoder
from modelbuild.reference import reference_features

IDS = np.array([[0, 7, 4, 5, 2, 1, 1], [0, 8, 9, 6, 4, 5, 2], [0, 4, 2, 1, 1, 1, 1]])
MASK = (IDS != 1).astype(np.int64)
VOCAB = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "query": 4, "hello": 7}


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> E5Weights:
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    write_tiny_e5(path)
    return read_e5(path)


def _run(model: onnx.ModelProto) -> tuple[np.ndarray, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    features, embedding = session.run(
        [ENCODER_FEATURES, ENCODER_OUTPUT], {"input_ids": IDS, "attention_mask": MASK}
    )
    return features, embedding


def test_fused_graph_matches_the_numpy_reference(weights: E5Weights) -> None:
    """The contrib-operator layout computes the same features as the reference within 1e-4,
    padded rows included, and really uses the fused operators."""
    model = build_encoder(weights, (1,), fused=True)
    ops = {node.op_type for node in model.graph.node}
    assert {"Attention", "BiasGelu"} <= ops
    assert "Softmax" not in ops
    features, _ = _run(model)
    want = reference_features(weights, IDS, MASK, feature_layers=(1,))
    assert float(np.abs(features - want).max()) <= 1e-4


def test_int8_encoder_has_the_outputs_and_stays_close(weights: E5Weights) -> None:
    """The int8 graph keeps both outputs and their shapes, quantises every block's weights
    (QAttention) except block 1's feed-forward output (the tiny model's only float MatMul left
    of FLOAT_WEIGHTS), and each pooled part stays within MIN_COSINE of the float reference while
    not being bit-equal to it."""
    _fused, cpu = build_cpu_encoder(weights, (1,))
    ops = [node.op_type for node in cpu.graph.node]
    assert ops.count("QAttention") == len(weights.layers)
    assert "Attention" not in ops
    float_weights = [n.input[1] for n in cpu.graph.node if n.op_type == "MatMul"]
    assert float_weights == ["l0.fo.weight_t"]
    assert ops.count("MatMulInteger") == 3 * len(weights.layers) - 1
    assert [o.name for o in cpu.graph.output] == [ENCODER_OUTPUT, ENCODER_FEATURES]
    features, embedding = _run(cpu)
    want = reference_features(weights, IDS, MASK, feature_layers=(1,))
    assert features.shape == want.shape == (3, 2 * HIDDEN)
    assert np.array_equal(features[:, -HIDDEN:], embedding)
    assert min_part_cosine(features, want, HIDDEN) >= MIN_COSINE
    assert float(np.abs(features - want).max()) > 1e-6


def test_int8_encoder_is_deterministic(weights: E5Weights) -> None:
    """Quantising the same weights twice gives the same bytes (a reproducible build)."""
    first = build_cpu_encoder(weights, (1,))[1].SerializeToString()
    second = build_cpu_encoder(weights, (1,))[1].SerializeToString()
    assert first == second


def test_min_part_cosine_takes_the_worst_part() -> None:
    """Parts are compared one by one: one orthogonal part of three gives 0, equal rows give 1."""
    a = np.array([[1.0, 0.0, 0.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    b = np.array([[2.0, 0.0, 0.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    assert min_part_cosine(a, b, 2) == pytest.approx(1.0)
    b[0, 3] = 0.0
    b[0, 2] = 1.0
    assert min_part_cosine(a, b, 2) == pytest.approx(0.0, abs=1e-6)


def _paths(root: Path) -> BuildPaths:
    paths = BuildPaths.under(root)
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    paths.tokenizer.parent.mkdir(parents=True)
    tok.save(str(paths.tokenizer))
    return paths


def test_build_writes_both_encoders_reproducibly(tmp_path: Path) -> None:
    """The build's encoder step writes the float32 and the int8 file, logs the int8 check, and
    two builds from the same weights give byte-identical files."""
    e5 = tmp_path / "e5.bin"
    write_tiny_e5(e5)
    events: list[tuple[str, dict[str, object]]] = []
    built = []
    for name in ("a", "b"):
        paths = _paths(tmp_path / name)
        _build_encoder(paths, e5, lambda event, **fields: events.append((event, fields)), (1,))
        built.append((paths.encoder.read_bytes(), paths.cpu_encoder.read_bytes()))
    assert paths.cpu_encoder == paths.encoder.parent / "model_cpu.onnx"
    assert built[0] == built[1]
    assert built[0][0] != built[0][1]
    checks = [fields for event, fields in events if event == "cpu_encoder_checked"]
    assert len(checks) == 2
    assert float(str(checks[0]["int8_min_cosine"])) >= MIN_COSINE


def _optimised_ops(model: onnx.ModelProto, tmp_path: Path, disabled: list[str]) -> set[str]:
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    ort.InferenceSession(
        model.SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=disabled,
    )
    return {node.op_type for node in onnx.load(str(tmp_path / "optimised.onnx")).graph.node}


def test_serving_keeps_the_int8_layer_norms_unfused(weights: E5Weights, tmp_path: Path) -> None:
    """onnxruntime would fuse the int8 graph's Add + LayerNormalization into the slow
    SkipLayerNormalization kernel; with the serving model's ENCODER_UNFUSED it does not."""
    from modelbuild.serving.pipeline_model import ENCODER_UNFUSED

    cpu = build_cpu_encoder(weights, (1,))[1]
    assert "SkipLayerNormalization" in _optimised_ops(cpu, tmp_path, [])
    unfused = _optimised_ops(cpu, tmp_path, list(ENCODER_UNFUSED))
    assert "SkipLayerNormalization" not in unfused
    assert "LayerNormalization" in unfused
