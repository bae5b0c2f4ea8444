"""A plain numpy forward pass of the e5 encoder: the yardstick the ONNX graph is checked against.

Same maths as the graph in :mod:`modelbuild.encoder_graph`, written independently: embeddings
(word + position + token type) and LayerNorm, twelve post-LayerNorm BERT blocks with exact (erf)
GELU, then mean pooling over the attention mask and L2 normalisation, as e5 expects; the
``features`` output pools the blocks in ``FEATURE_LAYERS`` the same way.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from modelbuild.e5_weights import E5Weights
from modelbuild.encoder_graph import FEATURE_LAYERS

__all__ = ["reference_embed", "reference_features"]

F32 = npt.NDArray[np.float32]
_MASK_NEG = -10000.0


def _layer_norm(x: F32, w: F32, b: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: F32 = ((x - mean) / np.sqrt(var + eps) * w + b).astype(np.float32)
    return out


def _gelu(x: F32) -> F32:
    erf = np.vectorize(math.erf, otypes=[np.float64])
    out: F32 = (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(np.float32)
    return out


def _softmax(x: F32) -> F32:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out: F32 = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    return out


def _pool(x: F32, mask: F32) -> F32:
    pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    norm = np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
    out: F32 = (pooled / norm).astype(np.float32)
    return out


def reference_embed(
    weights: E5Weights, input_ids: npt.NDArray[np.int64], attention_mask: npt.NDArray[np.int64]
) -> F32:
    """Sentence embeddings ``[batch, hidden]`` (L2-normalised) for token ids ``[batch, length]``."""
    hidden = weights.config.hidden
    return reference_features(weights, input_ids, attention_mask, ())[:, -hidden:]


def reference_features(
    weights: E5Weights,
    input_ids: npt.NDArray[np.int64],
    attention_mask: npt.NDArray[np.int64],
    feature_layers: tuple[int, ...] = FEATURE_LAYERS,
) -> F32:
    """The encoder's ``features``: pooled blocks of ``FEATURE_LAYERS``, then the embedding."""
    cfg = weights.config
    batch, length = input_ids.shape
    head_dim = cfg.hidden // cfg.heads
    x = weights.word_rows(input_ids) + weights.positions[:length] + weights.token_type
    x = _layer_norm(x, weights.emb_ln_w, weights.emb_ln_b, cfg.layer_norm_eps)
    mask = attention_mask.astype(np.float32)
    bias = ((1.0 - mask) * _MASK_NEG)[:, None, None, :]
    parts: list[F32] = []
    for number, layer in enumerate(weights.layers, start=1):

        def heads(t: F32) -> F32:
            return t.reshape(batch, length, cfg.heads, head_dim).transpose(0, 2, 1, 3)

        q = heads(x @ layer.q_w.T + layer.q_b)
        k = heads(x @ layer.k_w.T + layer.k_b)
        v = heads(x @ layer.v_w.T + layer.v_b)
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(head_dim)) + bias
        ctx = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, length, cfg.hidden)
        attn = ctx @ layer.attn_out_w.T + layer.attn_out_b
        x = _layer_norm(x + attn, layer.attn_ln_w, layer.attn_ln_b, cfg.layer_norm_eps)
        mid = _gelu(x @ layer.ffn_in_w.T + layer.ffn_in_b)
        ffn = mid @ layer.ffn_out_w.T + layer.ffn_out_b
        x = _layer_norm(x + ffn, layer.out_ln_w, layer.out_ln_b, cfg.layer_norm_eps)
        if number in feature_layers:
            parts.append(_pool(x, mask))
    parts.append(_pool(x, mask))
    return np.concatenate(parts, axis=1)
