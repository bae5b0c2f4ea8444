"""The fine-tune delta: stored and read back exactly (float16), merged as ``W + scale * B @ A``,
refused when it does not fit, applied by the build's encoder step, and the committed one is the
one the training manifest names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_cpu_encoder import IDS, MASK, VOCAB
from tiny_e5 import HIDDEN, write_tiny_e5
from tokenizers import Tokenizer, models, pre_tokenizers

from common.settings import project_root
from modelbuild.build import BuildPaths, _build_encoder
from modelbuild.e5_weights import E5Weights, read_e5
from modelbuild.encoder_delta import (
    LINEAR_NAMES,
    DeltaError,
    EncoderDelta,
    apply_delta,
    load_delta,
    save_delta,
)
from modelbuild.encoder_graph import ENCODER_OUTPUT
from modelbuild.reference import reference_embed


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> E5Weights:
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    write_tiny_e5(path)
    return read_e5(path)


def _delta(weights: E5Weights, blocks: tuple[int, ...] = (1,), rank: int = 2) -> EncoderDelta:
    rng = np.random.default_rng(3)
    adapters = {}
    for block in blocks:
        for name in LINEAR_NAMES:
            out_dim, in_dim = getattr(weights.layers[block], name).shape
            a = rng.normal(0, 0.3, (rank, in_dim)).astype(np.float16).astype(np.float32)
            b = rng.normal(0, 0.3, (out_dim, rank)).astype(np.float16).astype(np.float32)
            adapters[(block, name)] = (a, b)
    return EncoderDelta(blocks, rank, 2.0, adapters)


def test_round_trip_keeps_every_adapter(weights: E5Weights, tmp_path: Path) -> None:
    delta = _delta(weights)
    save_delta(delta, tmp_path / "delta.npz")
    back = load_delta(tmp_path / "delta.npz")
    assert (back.blocks, back.rank, back.scale) == (delta.blocks, delta.rank, delta.scale)
    for key, (a, b) in delta.adapters.items():
        np.testing.assert_array_equal(back.adapters[key][0], a)
        np.testing.assert_array_equal(back.adapters[key][1], b)
    assert back.fingerprint() == delta.fingerprint()


def test_apply_merges_the_low_rank_product(weights: E5Weights) -> None:
    delta = _delta(weights)
    tuned = apply_delta(weights, delta)
    a, b = delta.adapters[(1, "ffn_in_w")]
    np.testing.assert_allclose(
        tuned.layers[1].ffn_in_w, weights.layers[1].ffn_in_w + 2.0 * (b @ a), rtol=1e-6
    )
    np.testing.assert_array_equal(tuned.layers[0].q_w, weights.layers[0].q_w)
    np.testing.assert_array_equal(tuned.layers[1].q_b, weights.layers[1].q_b)


def test_a_zero_delta_changes_nothing(weights: E5Weights) -> None:
    delta = _delta(weights)
    zero = EncoderDelta(
        delta.blocks,
        delta.rank,
        delta.scale,
        {key: (a, np.zeros_like(b)) for key, (a, b) in delta.adapters.items()},
    )
    tuned = apply_delta(weights, zero)
    for name in LINEAR_NAMES:
        np.testing.assert_array_equal(
            getattr(tuned.layers[1], name), getattr(weights.layers[1], name)
        )


def test_fingerprint_follows_the_values(weights: E5Weights) -> None:
    delta = _delta(weights)
    a, b = delta.adapters[(1, "q_w")]
    changed = dict(delta.adapters)
    changed[(1, "q_w")] = (a, b + 0.5)
    assert EncoderDelta(delta.blocks, delta.rank, delta.scale, changed).fingerprint() != (
        delta.fingerprint()
    )


def test_a_delta_for_another_encoder_is_refused(weights: E5Weights) -> None:
    with pytest.raises(DeltaError, match="block 7"):
        apply_delta(weights, _shifted(weights))


def _shifted(weights: E5Weights) -> EncoderDelta:
    delta = _delta(weights)
    return EncoderDelta(
        (7,), delta.rank, delta.scale, {(7, name): v for (_, name), v in delta.adapters.items()}
    )


def test_malformed_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DeltaError, match="no such file"):
        load_delta(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DeltaError, match="not a delta"):
        load_delta(bad)
    partial = tmp_path / "partial.npz"
    np.savez(partial, blocks=np.array([1]), rank=np.array(2), scale=np.array(1.0))
    with pytest.raises(DeltaError, match="lacks the adapter"):
        load_delta(partial)


def test_the_build_writes_the_tuned_encoder_from_the_delta(
    weights: E5Weights, tmp_path: Path
) -> None:
    """The build's tuned step writes float32 and CPU encoders whose embedding is the reference
    forward pass of the merged weights, and stamps the delta's fingerprint."""
    e5 = tmp_path / "e5.bin"
    write_tiny_e5(e5)
    paths = BuildPaths.under(tmp_path / "root")
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    paths.tokenizer.parent.mkdir(parents=True)
    tok.save(str(paths.tokenizer))
    delta = _delta(weights)
    save_delta(delta, paths.delta)
    _build_encoder(paths, e5, lambda *_a, **_k: None, (1,), tuned=True)
    assert not paths.encoder.exists()
    session = ort.InferenceSession(str(paths.tuned_encoder), providers=["CPUExecutionProvider"])
    (got,) = session.run([ENCODER_OUTPUT], {"input_ids": IDS, "attention_mask": MASK})
    want = reference_embed(apply_delta(weights, delta), IDS, MASK)
    untuned = reference_embed(weights, IDS, MASK)
    assert got.shape == (len(IDS), HIDDEN)
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert np.abs(want - untuned).max() > 1e-2
    assert paths.tuned_cpu_encoder.is_file()
    assert paths.tuned_stamp.read_text().strip() == delta.fingerprint()


def test_the_committed_delta_is_the_one_training_wrote() -> None:
    """The delta in the repository is the one ``modstream models train`` recorded in the
    training manifest (a hand edit or a partial commit shows here)."""
    repository = project_root() / "model_repository"
    manifest = json.loads((repository / "moderation" / "training.json").read_text())
    delta = load_delta(repository / "encoder" / "delta.npz")
    assert delta.fingerprint() == manifest["delta_fingerprint"]
    assert delta.blocks == tuple(range(12 - manifest["config"]["tuned_blocks"], 12))
    assert delta.rank == manifest["config"]["rank"]
