"""The CPU encoder: the same weights as ``model.onnx``, its matrix products in split int8.

Why split. The heads read the pooled states of four blocks and are sensitive to them: on the
887 chat and dev-set lines, every 8-bit layout moved some head probability by more than the
0.02 the moderation models allow (onnxruntime's dynamic quantisation, per tensor: 0.49; with
7-bit weights: 0.38; per-token activation scales: 0.19; weights alone rounded to 8 bits,
activations float32: 0.058; activations alone to 8 bits, weights exact: 0.18). So each weight
and each activation is held as a coarse int8 part plus an int8 remainder (about 14 and 15
significant bits), and each matrix product becomes two integer products:

- weights, per output channel ``n``: ``w = ws_n * (coarse + remainder / 128)`` with
  ``ws_n = max |w_n| / 63``, ``coarse`` in ``[-63, 63]`` and ``remainder`` in ``[-64, 64]``;
- activations, per token (or per tensor, see below): ``x = s * (q1 + q2 / 128)`` with
  ``s = max |x| / 127``, ``q1`` in ``[-127, 127]`` and ``q2`` in ``[-64, 64]``, stored as
  uint8 with zero point 128;
- ``x . w = s * ws * (q1 . coarse + ([q1 | q2] . [remainder ; coarse]) / 128)`` up to the
  dropped ``q2 . remainder / 128**2`` term: two ``MatMulIntegerToFloat`` products, the second
  over the stacked ``2K`` inputs.

The same answer on every CPU. onnxruntime's uint8 x int8 kernels on AVX2 and AVX-512 without
VNNI multiply byte pairs with ``vpmaddubsw``, whose 16-bit pair sums saturate above 32767; VNNI
(``vpdpbusd``) and AMX (``tdpbusd``) do not. No stored int8 weight exceeds :data:`INT8_LIMIT`
(64) in magnitude and no activation byte exceeds 255, so a pair sum is at most
``2 * 255 * 64 = 32640``: every kernel computes the same exact int32 products, and what differs
between instruction sets is the float rounding of the rest of the graph (measured under an
emulated AVX2-only CPU: BENCHMARKS.md).

The same answer in any batch. No scale depends on the other messages of a batch: the inputs of
the Q/K/V and feed-forward-in products are LayerNorm outputs, bounded by
``|gamma| * sqrt(hidden - 1) + |beta|`` per channel (:func:`layer_norm_bound`), which becomes
their fixed scale; the attention output and feed-forward output products (attention context and
GELU output, with no tight bound) take one scale per token. Neither can clip.

Attention scores, softmax, LayerNorm and GELU stay float32 (onnxruntime's contrib
``MultiHeadAttention`` and ``BiasGelu``). Deterministic: the same weights give the same file.
``quantised=False`` writes the same layout with float32 products (the layout's own check against
the numpy reference, in the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, numpy_helper

from modelbuild.e5_weights import E5Config, E5Layer, E5Weights
from modelbuild.encoder_graph import (
    FEATURE_LAYERS,
    MASK_NEG,
    MS_DOMAIN,
    Block,
    Graph,
    Masks,
    assemble,
)

__all__ = [
    "ACTIVATION_LEVELS",
    "COARSE_LEVELS",
    "INT8_LIMIT",
    "REMAINDER_STEPS",
    "SplitWeight",
    "build_cpu_encoder",
    "largest_int8_weight",
    "layer_norm_bound",
    "split_weight",
]

COARSE_LEVELS = 63
"""The coarse weight part spans ``[-63, 63]``."""
REMAINDER_STEPS = 128
"""A remainder step is the coarse step divided by this (a power of two: exact in float32)."""
INT8_LIMIT = 64
"""No int8 weight the CPU encoder stores exceeds this in magnitude (the saturation-free bound)."""
ACTIVATION_LEVELS = 127
"""The coarse activation part spans ``[-127, 127]`` around the zero point 128."""
_ZERO_POINT = 128
_TINY = 1e-30  # a token whose activations are all zero still gets a positive scale

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class SplitWeight:
    """A ``[out, in]`` weight as ``scale[:, None] * (coarse + remainder / REMAINDER_STEPS)``."""

    coarse: npt.NDArray[np.int8]
    remainder: npt.NDArray[np.int8]
    scale: F32

    def value(self) -> F32:
        """The weight the two parts represent."""
        parts = self.coarse.astype(np.float64) + self.remainder / REMAINDER_STEPS
        return (self.scale[:, None] * parts).astype(np.float32)


def split_weight(w: F32) -> SplitWeight:
    """``w`` split per output channel (row); the remainder is rounded to its own grid, so the
    represented weight is within ``scale / 256`` of ``w``."""
    scale = np.maximum(np.abs(w).max(axis=1) / COARSE_LEVELS, _TINY).astype(np.float32)
    coarse = np.clip(np.round(w / scale[:, None]), -COARSE_LEVELS, COARSE_LEVELS)
    rest = (w - coarse * scale[:, None]) / (scale[:, None] / REMAINDER_STEPS)
    remainder = np.clip(np.round(rest), -INT8_LIMIT, INT8_LIMIT)
    return SplitWeight(coarse.astype(np.int8), remainder.astype(np.int8), scale)


def layer_norm_bound(gamma: F32, beta: F32) -> float:
    """The largest magnitude a LayerNorm with these parameters can output: a normalised value
    never exceeds ``sqrt(n - 1)`` for ``n`` channels."""
    reach = np.abs(gamma.astype(np.float64)) * math.sqrt(gamma.size - 1) + np.abs(beta)
    return float(reach.max())


def largest_int8_weight(model: onnx.ModelProto) -> int:
    """The largest magnitude of any int8 initialiser in ``model`` (0 when it has none)."""
    largest = 0
    for init in model.graph.initializer:
        if init.data_type == TensorProto.INT8:
            values = numpy_helper.to_array(init).astype(np.int16)
            largest = max(largest, int(np.abs(values).max(initial=0)))
    return largest


class _Products:
    """Writes the matrix products of the CPU layout: split int8, or float32 (the layout check)."""

    def __init__(self, g: Graph, quantised: bool) -> None:
        self.g = g
        self.quantised = quantised

    def linear(self, x: str, w: F32, b: F32, p: str, bound: float | None) -> tuple[str, str]:
        """``x @ w.T`` and the name of its bias ``b`` (added by the caller, often inside a
        fused operator). ``bound`` is the fixed activation range of ``x`` (its scale is then
        ``bound / 127``); ``None`` takes one scale per token."""
        g = self.g
        bias = g.const(p + ".bias", b.astype(np.float32))
        if not self.quantised:
            return g.op("MatMul", [x, g.weight(w, p)]), bias
        split = split_weight(w)
        coarse = g.const(p + ".coarse_t", np.ascontiguousarray(split.coarse.T))
        stacked = np.concatenate([split.remainder.T, split.coarse.T])
        stacked_name = g.const(p + ".stacked_t", np.ascontiguousarray(stacked))
        w_scale = g.const(p + ".scale", split.scale)
        w_fine = g.const(p + ".scale_fine", split.scale / np.float32(REMAINDER_STEPS))
        zero = g.const("c.u8_zero_point", np.array(_ZERO_POINT, dtype=np.uint8))
        if bound is None:  # per token: divide by the token's scale, quantise on a unit grid
            peak = g.op("ReduceMax", [g.op("Abs", [x]), g.ints(-1)], keepdims=1)
            token_scale = g.op("Mul", [peak, g.scalar(1 / ACTIVATION_LEVELS)])
            token_scale = g.op("Max", [token_scale, g.scalar(_TINY)])
            x = g.op("Div", [x, token_scale])
            a_scale = g.scalar(1.0)
        else:
            a_scale = g.const(
                p + ".input_scale", np.array(bound / ACTIVATION_LEVELS, dtype=np.float32)
            )
        fine_scale = g.op("Mul", [a_scale, g.scalar(1 / REMAINDER_STEPS)])
        q1 = g.op("QuantizeLinear", [x, a_scale, zero])
        rest = g.op("Sub", [x, g.op("DequantizeLinear", [q1, a_scale, zero])])
        q2 = g.op("QuantizeLinear", [rest, fine_scale, zero])
        high = g.op("MatMulIntegerToFloat", [q1, coarse, a_scale, w_scale, zero], MS_DOMAIN)
        both = g.op("Concat", [q1, q2], axis=-1)
        low = g.op("MatMulIntegerToFloat", [both, stacked_name, a_scale, w_fine, zero], MS_DOMAIN)
        y = g.op("Add", [high, low])
        if bound is None:
            y = g.op("Mul", [y, token_scale])
        return y, bias


def _cpu_block(quantised: bool, input_bounds: dict[str, float]) -> Block:
    """The block writer; ``input_bounds`` maps a block's prefix to the bound of the LayerNorm
    that feeds it (the embedding's for the first block, the previous block's output one after)."""

    def block(g: Graph, x: str, layer: E5Layer, p: str, masks: Masks, cfg: E5Config) -> str:
        products = _Products(g, quantised)
        eps = cfg.layer_norm_eps
        qkv_w = np.concatenate([layer.q_w, layer.k_w, layer.v_w])
        qkv_b = np.concatenate([layer.q_b, layer.k_b, layer.v_b])
        qkv, qkv_bias = products.linear(x, qkv_w, qkv_b, p + ".qkv", input_bounds[p])
        q, k, v = g.ops("Split", [qkv], 3, axis=-1, num_outputs=3)
        ctx = g.op(
            "MultiHeadAttention",
            [q, k, v, qkv_bias, masks.int32],
            MS_DOMAIN,
            num_heads=cfg.heads,
            mask_filter_value=MASK_NEG,
        )
        attn, attn_bias = products.linear(ctx, layer.attn_out_w, layer.attn_out_b, p + ".ao", None)
        x = g.op("Add", [g.op("Add", [x, attn]), attn_bias])
        x = g.layer_norm(x, layer.attn_ln_w, layer.attn_ln_b, p + ".aln", eps)
        ffn_bound = layer_norm_bound(layer.attn_ln_w, layer.attn_ln_b)
        mid, mid_bias = products.linear(x, layer.ffn_in_w, layer.ffn_in_b, p + ".fi", ffn_bound)
        gelu = g.op("BiasGelu", [mid, mid_bias], MS_DOMAIN)
        out, out_bias = products.linear(gelu, layer.ffn_out_w, layer.ffn_out_b, p + ".fo", None)
        x = g.op("Add", [g.op("Add", [x, out]), out_bias])
        return g.layer_norm(x, layer.out_ln_w, layer.out_ln_b, p + ".oln", eps)

    return block


def build_cpu_encoder(
    weights: E5Weights, feature_layers: tuple[int, ...] = FEATURE_LAYERS, *, quantised: bool = True
) -> onnx.ModelProto:
    """The CPU encoder for ``weights``: same inputs and outputs as the portable graph."""
    norms = [(weights.emb_ln_w, weights.emb_ln_b)]
    norms += [(layer.out_ln_w, layer.out_ln_b) for layer in weights.layers]
    bounds = {f"l{i}": layer_norm_bound(*norms[i]) for i in range(len(weights.layers))}
    block = _cpu_block(quantised, bounds)
    return assemble(weights, feature_layers, block, name="e5_small_cpu", contrib=True)
