"""The CPU encoder: its layout equals the reference, its split-int8 products cannot saturate, stay
close to float32 and do not depend on the batch, and the build writes it reproducibly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from onnx import TensorProto, numpy_helper
from tiny_e5 import HIDDEN, write_tiny_e5
from tokenizers import Tokenizer, models, pre_tokenizers

from modelbuild.build import BuildPaths, _build_encoder
from modelbuild.cpu_encoder import (
    COARSE_LEVELS,
    INT8_LIMIT,
    REMAINDER_STEPS,
    build_cpu_encoder,
    largest_int8_weight,
    layer_norm_bound,
    split_weight,
)
from modelbuild.e5_weights import E5Weights, read_e5
from modelbuild.encoder_graph import ENCODER_FEATURES, ENCODER_OUTPUT
from modelbuild.reference import reference_features

IDS = np.array([[0, 7, 4, 5, 2, 1, 1], [0, 8, 9, 6, 4, 5, 2], [0, 4, 2, 1, 1, 1, 1]])
MASK = (IDS != 1).astype(np.int64)
VOCAB = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "query": 4, "hello": 7}


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> E5Weights:
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    write_tiny_e5(path)
    return read_e5(path)


def _run(model: onnx.ModelProto, ids: np.ndarray = IDS) -> tuple[np.ndarray, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    mask = (ids != 1).astype(np.int64)
    features, embedding = session.run(
        [ENCODER_FEATURES, ENCODER_OUTPUT], {"input_ids": ids, "attention_mask": mask}
    )
    return features, embedding


def test_layout_with_float_products_matches_the_numpy_reference(weights: E5Weights) -> None:
    """The CPU layout (contrib MultiHeadAttention and BiasGelu) with float32 products computes
    the reference's features within 1e-4, padded rows included."""
    model = build_cpu_encoder(weights, (1,), quantised=False)
    ops = {node.op_type for node in model.graph.node}
    assert {"MultiHeadAttention", "BiasGelu"} <= ops
    assert "MatMulIntegerToFloat" not in ops
    features, _ = _run(model)
    want = reference_features(weights, IDS, MASK, feature_layers=(1,))
    assert float(np.abs(features - want).max()) <= 1e-4


def test_every_integer_product_reads_int8_weights_within_the_saturation_free_bound(
    weights: E5Weights,
) -> None:
    """Every block product is two MatMulIntegerToFloat nodes whose weights are int8 initialisers
    of magnitude <= 64 and whose activations are uint8 around the zero point 128: a byte-pair sum
    is then at most 2 * 255 * 64 < 32767, so vpmaddubsw (AVX2, AVX-512BW) cannot saturate."""
    cpu = build_cpu_encoder(weights, (1,))
    inits = {i.name: i for i in cpu.graph.initializer}
    products = [n for n in cpu.graph.node if n.op_type == "MatMulIntegerToFloat"]
    assert len(products) == 2 * 4 * len(weights.layers)  # qkv, attention out, ffn in, ffn out
    assert not [n for n in cpu.graph.node if n.op_type == "MatMul"]
    for node in products:
        assert inits[node.input[1]].data_type == TensorProto.INT8
        assert numpy_helper.to_array(inits[node.input[4]]).item() == 128
    for node in cpu.graph.node:
        if node.op_type == "QuantizeLinear":
            zero = numpy_helper.to_array(inits[node.input[2]])
            assert zero.dtype == np.uint8
            assert zero.item() == 128
    assert largest_int8_weight(cpu) <= INT8_LIMIT
    assert 2 * 255 * INT8_LIMIT < 2**15


def test_largest_int8_weight_sees_an_int8_initialiser() -> None:
    """The inspection finds the largest magnitude (-100 here) and ignores other types."""
    graph = onnx.helper.make_graph(
        [],
        "g",
        [],
        [],
        initializer=[
            numpy_helper.from_array(np.array([3, -100, 7], dtype=np.int8), "a"),
            numpy_helper.from_array(np.array([1000.0], dtype=np.float32), "b"),
        ],
    )
    assert largest_int8_weight(onnx.helper.make_model(graph)) == 100


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 6), st.integers(1, 40)),
        elements=st.floats(-8, 8, width=32),
    )
)
def test_split_weight_represents_the_weight_within_its_fine_step(w: np.ndarray) -> None:
    """Coarse parts stay in [-63, 63], remainders in [-64, 64], and the two together are within
    half a fine step (scale / 256) of every weight, all-zero rows included."""
    split = split_weight(w)
    assert int(np.abs(split.coarse.astype(np.int16)).max()) <= COARSE_LEVELS
    assert int(np.abs(split.remainder.astype(np.int16)).max()) <= INT8_LIMIT
    fine = split.scale[:, None] / REMAINDER_STEPS
    assert np.all(np.abs(split.value() - w) <= fine / 2 + 1e-6 * np.abs(w) + 1e-30)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float32, st.integers(2, 64), elements=st.floats(-1e4, 1e4, width=32)),
    st.integers(0, 2**32 - 1),
)
def test_layer_norm_never_exceeds_its_bound(x: np.ndarray, seed: int) -> None:
    """Whatever the input (a single spike included), a LayerNorm's output stays within
    layer_norm_bound of its weight and bias: the fixed input scale cannot clip."""
    rng = np.random.default_rng(seed)
    gamma = rng.normal(1, 0.5, x.size).astype(np.float32)
    beta = rng.normal(0, 0.3, x.size).astype(np.float32)
    wide = x.astype(np.float64)  # a float32 mean of large values is off by more than the slack
    centred = wide - wide.mean()
    out = centred / np.sqrt((centred**2).mean() + 1e-12) * gamma + beta
    assert float(np.abs(out).max()) <= layer_norm_bound(gamma, beta) * (1 + 1e-6)


def test_cpu_encoder_stays_close_to_the_reference(weights: E5Weights) -> None:
    """Both outputs keep their shapes and stay within 2e-3 of the float reference (about 15
    significant bits per product), while not being bit-equal to it (it is quantised)."""
    features, embedding = _run(build_cpu_encoder(weights, (1,)))
    want = reference_features(weights, IDS, MASK, feature_layers=(1,))
    assert features.shape == want.shape == (3, 2 * HIDDEN)
    assert np.array_equal(features[:, -HIDDEN:], embedding)
    gap = float(np.abs(features - want).max())
    assert 1e-7 < gap <= 2e-3


def test_a_message_gets_the_same_numbers_whatever_its_batch(weights: E5Weights) -> None:
    """A message alone, with other messages, and with more padding gets the same features
    within 1e-6: no scale of the CPU encoder depends on the rest of the batch."""
    cpu = build_cpu_encoder(weights, (1,))
    alone, _ = _run(cpu, IDS[1:2, :7])
    others = np.array([[0, 9, 9, 9, 9, 9, 9, 2, 1], [*IDS[1], 1, 1], [0, 4, 2, 1, 1, 1, 1, 1, 1]])
    batched, _ = _run(cpu, others)
    assert float(np.abs(batched[1] - alone[0]).max()) <= 1e-6


def test_cpu_encoder_is_deterministic(weights: E5Weights) -> None:
    """Writing the CPU encoder twice from the same weights gives the same bytes."""
    first = build_cpu_encoder(weights, (1,)).SerializeToString()
    assert first == build_cpu_encoder(weights, (1,)).SerializeToString()


def _paths(root: Path) -> BuildPaths:
    paths = BuildPaths.under(root)
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    paths.tokenizer.parent.mkdir(parents=True)
    tok.save(str(paths.tokenizer))
    return paths


def test_build_writes_both_encoders_reproducibly(tmp_path: Path) -> None:
    """The build's encoder step writes the float32 and the CPU file, logs the CPU encoder's
    checks, and two builds from the same weights give byte-identical files."""
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
    checks = [fields for event, fields in events if event == "cpu_encoder_built"]
    assert len(checks) == 2
    assert checks[0]["largest_int8_weight"] == largest_int8_weight(onnx.load(paths.cpu_encoder))
    assert 0 < float(str(checks[0]["max_feature_error"])) <= 2e-3
