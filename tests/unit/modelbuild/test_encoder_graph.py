"""The e5 reader, the hand-written ONNX encoder and the numpy reference agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tiny_e5 import HIDDEN, PIECES, quantize_q4, write_tiny_e5

from modelbuild.e5_weights import E5FormatError, dequantize_q4, read_e5
from modelbuild.encoder_graph import (
    ENCODER_FEATURES,
    ENCODER_OUTPUT,
    build_encoder,
    save_encoder,
)
from modelbuild.reference import reference_embed, reference_features


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    write_tiny_e5(path)
    return path


def test_dequantize_q4_unpacks_low_then_high_nibbles() -> None:
    """Byte j holds value j (low nibble) and value j+16 (high nibble); values are (q-8)*scale."""
    nibbles = np.zeros((1, 16), dtype=np.uint8)
    nibbles[0, 0] = 0x9F  # value 0 -> 15, value 16 -> 9
    nibbles[0, 1] = 0x08  # value 1 -> 8, value 17 -> 0
    out = dequantize_q4(nibbles, np.array([0.5], dtype=np.float32))
    assert out.shape == (32,)
    assert out[0] == pytest.approx((15 - 8) * 0.5)
    assert out[16] == pytest.approx((9 - 8) * 0.5)
    assert out[1] == pytest.approx(0.0)
    assert out[17] == pytest.approx(-8 * 0.5)


def test_quantised_round_trip_is_close() -> None:
    """Weights written as Q4_0 and read back stay within half a quantisation step."""
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (3, 64)).astype(np.float32)
    raw = np.frombuffer(quantize_q4(x), dtype=[("d", "<f2"), ("qs", "u1", (16,))]).reshape(3, 2)
    back = dequantize_q4(raw["qs"].copy(), raw["d"].astype(np.float32))
    step = np.abs(x).reshape(3, 2, 32).max(axis=2) / 7.0
    assert np.all(np.abs(back - x).reshape(3, 2, 32) <= step[..., None] * 0.51 + 1e-3)


def test_reader_gives_sizes_and_vocabulary(tiny_model: Path) -> None:
    """The header, the piece list and every tensor come back with the written shapes."""
    weights = read_e5(tiny_model)
    assert weights.config.hidden == HIDDEN
    assert weights.pieces == PIECES
    assert weights.word_nibbles.shape == (len(PIECES), HIDDEN // 32, 16)
    assert weights.positions.shape == (16, HIDDEN)
    assert len(weights.layers) == 2
    assert weights.layers[0].ffn_in_w.shape == (128, HIDDEN)


def test_reader_rejects_other_files(tmp_path: Path) -> None:
    """A file without the E5S1 magic is refused with a typed error."""
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(E5FormatError):
        read_e5(bad)


def test_onnx_encoder_matches_numpy_reference(tiny_model: Path, tmp_path: Path) -> None:
    """The ONNX graph equals the reference forward pass within 1e-4, padding included."""
    weights = read_e5(tiny_model)
    path = tmp_path / "encoder.onnx"
    save_encoder(build_encoder(weights, feature_layers=(1,)), path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.array([[0, 7, 4, 5, 2, 1, 1], [0, 8, 9, 6, 4, 5, 2]], dtype=np.int64)
    mask = (ids != 1).astype(np.int64)
    (got,) = session.run([ENCODER_OUTPUT], {"input_ids": ids, "attention_mask": mask})
    want = reference_embed(weights, ids, mask)
    assert got.shape == (2, HIDDEN)
    assert float(np.abs(got - want).max()) <= 1e-4
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_onnx_features_match_numpy_reference(tiny_model: Path) -> None:
    """``features`` = the pooled lower blocks then the embedding, each row part unit-length."""
    weights = read_e5(tiny_model)
    session = ort.InferenceSession(
        build_encoder(weights, feature_layers=(1,)).SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    ids = np.array([[0, 7, 4, 5, 2, 1, 1], [0, 8, 9, 6, 4, 5, 2]], dtype=np.int64)
    mask = (ids != 1).astype(np.int64)
    got, embedding = session.run(
        [ENCODER_FEATURES, ENCODER_OUTPUT], {"input_ids": ids, "attention_mask": mask}
    )
    want = reference_features(weights, ids, mask, feature_layers=(1,))
    parts = 2
    assert not np.allclose(got[:, :HIDDEN], embedding, atol=1e-3)
    assert got.shape == want.shape == (2, HIDDEN * parts)
    assert float(np.abs(got - want).max()) <= 1e-4
    assert np.array_equal(got[:, -HIDDEN:], embedding)
    norms = np.linalg.norm(got.reshape(2, parts, HIDDEN), axis=2)
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_feature_layers_must_exist(tiny_model: Path) -> None:
    with pytest.raises(ValueError, match="feature layers"):
        build_encoder(read_e5(tiny_model), feature_layers=(3,))


def test_padding_does_not_change_the_embedding(tiny_model: Path) -> None:
    """Extra padded columns leave a row's embedding unchanged (what the serving trim relies on)."""
    weights = read_e5(tiny_model)
    model = build_encoder(weights, feature_layers=(1,))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    short = np.array([[0, 7, 4, 2]], dtype=np.int64)
    padded = np.array([[0, 7, 4, 2, 1, 1, 1, 1]], dtype=np.int64)
    a = session.run(None, {"input_ids": short, "attention_mask": np.ones_like(short)})[0]
    b = session.run(None, {"input_ids": padded, "attention_mask": (padded != 1).astype(np.int64)})[
        0
    ]
    assert float(np.abs(a - b).max()) <= 1e-5
