"""Write the e5 encoder as an ONNX graph with ``onnx.helper``; no deep-learning framework needed.

Inputs ``input_ids`` and ``attention_mask`` (INT64 ``[batch, length]``). Outputs ``embedding``
(FP32 ``[batch, 384]``: the last block's states mean-pooled over the mask and L2-normalised, as
e5 is trained) and ``features`` (FP32 ``[batch, 384 * (len(FEATURE_LAYERS) + 1)]``: the same
pooling of the blocks in ``FEATURE_LAYERS``, each L2-normalised, then ``embedding``; lower blocks
keep more of the wording, which heads such as sentiment use). The word embedding stays
4-bit inside the graph (Gather on packed nibbles, unpacked with bit operations) so the file is
about 140 MB instead of 520 MB; the transformer blocks are dequantised to float32.

Two layouts of the same maths: the portable one, standard ONNX operators only (what the GPU and
any runtime can run), and ``fused=True``, where the attention and the GELU of each block are
onnxruntime contrib operators (``com.microsoft``: ``Attention`` with one fused Q/K/V weight, and
``BiasGelu``). The fused layout is what :mod:`modelbuild.cpu_encoder` quantises: onnxruntime's
quantiser turns its ``Attention`` into ``QAttention``, one int8 kernel per block.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from modelbuild.e5_weights import E5Config, E5Layer, E5Weights

__all__ = [
    "ENCODER_FEATURES",
    "ENCODER_INPUTS",
    "ENCODER_OUTPUT",
    "FEATURE_LAYERS",
    "MS_DOMAIN",
    "OPSET",
    "build_encoder",
    "save_encoder",
]

ENCODER_INPUTS = ("input_ids", "attention_mask")
ENCODER_OUTPUT = "embedding"
ENCODER_FEATURES = "features"
FEATURE_LAYERS = (4, 8, 10)
"""Blocks (1-based) whose pooled states precede ``embedding`` in ``features``."""
OPSET = 18
MS_DOMAIN = "com.microsoft"
"""onnxruntime's contrib operators, used by the fused layout."""
_MASK_NEG = -10000.0


class _Graph:
    """Accumulates nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, name: str, value: npt.NDArray[np.generic]) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        node = helper.make_node(op_type, inputs, [out], name=out, **attrs)
        if domain:
            node.domain = domain
        self.nodes.append(node)
        return out

    def used_inits(self) -> list[onnx.TensorProto]:
        """The initialisers some node reads (a layout may leave shared constants unused)."""
        read = {name for node in self.nodes for name in node.input}
        return [t for t in self.inits if t.name in read]

    def weight(self, w: npt.NDArray[np.float32], p: str) -> str:
        """``w`` (``[out, in]``) stored transposed, ready to be a MatMul's right-hand side."""
        return self.const(p + ".weight_t", np.ascontiguousarray(w.T.astype(np.float32)))

    def linear(self, x: str, w: npt.NDArray[np.float32], b: npt.NDArray[np.float32], p: str) -> str:
        wt = self.weight(w, p)
        bias = self.const(p + ".bias", b.astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, wt]), bias])


def _fused_block(g: _Graph, x: str, layer: E5Layer, p: str, mask: str, cfg: E5Config) -> str:
    """One block with contrib operators where they pay: the attention and the GELU; same maths
    as the portable block (the build checks both against the numpy reference). The residual
    LayerNorms stay ``Add`` + ``LayerNormalization``: onnxruntime's ``SkipLayerNormalization``
    kernel took a quarter of the int8 graph's time on short chat batches, ``LayerNormalization``
    a tenth of that."""
    qkv_w = g.weight(np.concatenate([layer.q_w, layer.k_w, layer.v_w]), p + ".qkv")
    qkv_b = g.const(p + ".qkv.bias", np.concatenate([layer.q_b, layer.k_b, layer.v_b]))
    ctx = g.op(
        "Attention",
        [x, qkv_w, qkv_b, mask],
        domain=MS_DOMAIN,
        num_heads=cfg.heads,
        mask_filter_value=_MASK_NEG,
    )
    attn = g.linear(ctx, layer.attn_out_w, layer.attn_out_b, p + ".ao")
    x = g.op(
        "LayerNormalization",
        [
            g.op("Add", [x, attn]),
            g.const(p + ".aln.w", layer.attn_ln_w),
            g.const(p + ".aln.b", layer.attn_ln_b),
        ],
        axis=-1,
        epsilon=cfg.layer_norm_eps,
    )
    mid = g.op("MatMul", [x, g.weight(layer.ffn_in_w, p + ".fi")])
    gelu = g.op("BiasGelu", [mid, g.const(p + ".fi.bias", layer.ffn_in_b)], domain=MS_DOMAIN)
    out = g.linear(gelu, layer.ffn_out_w, layer.ffn_out_b, p + ".fo")
    return g.op(
        "LayerNormalization",
        [
            g.op("Add", [x, out]),
            g.const(p + ".oln.w", layer.out_ln_w),
            g.const(p + ".oln.b", layer.out_ln_b),
        ],
        axis=-1,
        epsilon=cfg.layer_norm_eps,
    )


def build_encoder(
    weights: E5Weights, feature_layers: tuple[int, ...] = FEATURE_LAYERS, *, fused: bool = False
) -> onnx.ModelProto:
    """The encoder graph for ``weights``; checked by ``onnx.checker`` before it is returned.

    ``feature_layers`` (1-based block numbers, each at most the number of blocks) are pooled into
    ``features`` ahead of the embedding. ``fused`` writes the blocks as onnxruntime contrib
    operators (onnxruntime only; see the module docstring)."""
    if any(not 1 <= n <= len(weights.layers) for n in feature_layers):
        raise ValueError(f"feature layers {feature_layers} outside 1..{len(weights.layers)}")
    cfg = weights.config
    g = _Graph()
    head_dim = cfg.hidden // cfg.heads
    blocks = cfg.hidden // 32

    # Word embedding: gather packed rows, unpack nibbles, subtract 8, scale per block.
    nib = g.op("Gather", [g.const("emb.word.nibbles", weights.word_nibbles), "input_ids"])
    low = g.op("BitwiseAnd", [nib, g.const("c.u8_15", np.array(15, dtype=np.uint8))])
    high = g.op(
        "BitShift", [nib, g.const("c.u8_4", np.array(4, dtype=np.uint8))], direction="RIGHT"
    )
    vals = g.op("Cast", [g.op("Concat", [low, high], axis=-1)], to=TensorProto.FLOAT)
    vals = g.op("Sub", [vals, g.const("c.f_8", np.array(8.0, dtype=np.float32))])
    scales = g.const("emb.word.scales", weights.word_scales.reshape(-1, blocks, 1))
    vals = g.op("Mul", [vals, g.op("Gather", [scales, "input_ids"])])
    hidden_shape = g.const("c.shape_bl_h", np.array([0, 0, cfg.hidden]))
    word = g.op("Reshape", [vals, hidden_shape])

    # Positions 0..length-1 of the (padding-row-free) table, plus token type 0.
    length = g.op(
        "Gather",
        [g.op("Shape", ["input_ids"]), g.const("c.i64_1", np.array([1], dtype=np.int64))],
    )
    pos = g.op(
        "Slice",
        [
            g.const("emb.pos", weights.positions),
            g.const("c.i64_0", np.array([0], dtype=np.int64)),
            length,
            g.const("c.axis0", np.array([0], dtype=np.int64)),
        ],
    )
    x = g.op("Add", [g.op("Add", [word, pos]), g.const("emb.type", weights.token_type)])
    x = g.op(
        "LayerNormalization",
        [x, g.const("emb.ln.w", weights.emb_ln_w), g.const("emb.ln.b", weights.emb_ln_b)],
        axis=-1,
        epsilon=cfg.layer_norm_eps,
    )

    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    one = g.const("c.f_1", np.array(1.0, dtype=np.float32))
    bias = ""
    if not fused:  # the fused Attention operator reads the mask itself
        inv = g.op("Sub", [one, mask_f])
        bias = g.op("Mul", [inv, g.const("c.f_neg", np.array(_MASK_NEG, dtype=np.float32))])
        bias = g.op("Unsqueeze", [bias, g.const("c.axes_12", np.array([1, 2], dtype=np.int64))])
    split_shape = g.const("c.shape_heads", np.array([0, 0, cfg.heads, head_dim]))
    scale = g.const("c.f_scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    sqrt2 = g.const("c.f_sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    half = g.const("c.f_half", np.array(0.5, dtype=np.float32))

    mask3 = g.op("Unsqueeze", [mask_f, g.const("c.axes_2", np.array([2], dtype=np.int64))])
    count = g.op("ReduceSum", [mask_f, "c.i64_1"], keepdims=1)
    eps = g.const("c.f_eps", np.array(1e-12, dtype=np.float32))
    last_axis = g.const("c.i64_m1", np.array([-1]))

    def pooled(states: str) -> str:
        """Mean over the unmasked positions, L2-normalised."""
        summed = g.op("ReduceSum", [g.op("Mul", [states, mask3]), "c.i64_1"], keepdims=0)
        mean = g.op("Div", [summed, count])
        norm = g.op("Max", [g.op("ReduceL2", [mean, last_axis], keepdims=1), eps])
        return g.op("Div", [mean, norm])

    mask_i = g.op("Cast", ["attention_mask"], to=TensorProto.INT32) if fused else ""
    lower: list[str] = []
    for i, layer in enumerate(weights.layers):
        p = f"l{i}"
        if fused:
            x = _fused_block(g, x, layer, p, mask_i, cfg)
            if i + 1 in feature_layers:
                lower.append(pooled(x))
            continue
        q = g.op(
            "Transpose",
            [g.op("Reshape", [g.linear(x, layer.q_w, layer.q_b, p + ".q"), split_shape])],
            perm=[0, 2, 1, 3],
        )
        k = g.op(
            "Transpose",
            [g.op("Reshape", [g.linear(x, layer.k_w, layer.k_b, p + ".k"), split_shape])],
            perm=[0, 2, 3, 1],
        )
        v = g.op(
            "Transpose",
            [g.op("Reshape", [g.linear(x, layer.v_w, layer.v_b, p + ".v"), split_shape])],
            perm=[0, 2, 1, 3],
        )
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), hidden_shape])
        attn = g.linear(ctx, layer.attn_out_w, layer.attn_out_b, p + ".ao")
        x = g.op(
            "LayerNormalization",
            [
                g.op("Add", [x, attn]),
                g.const(p + ".aln.w", layer.attn_ln_w),
                g.const(p + ".aln.b", layer.attn_ln_b),
            ],
            axis=-1,
            epsilon=cfg.layer_norm_eps,
        )
        mid = g.linear(x, layer.ffn_in_w, layer.ffn_in_b, p + ".fi")
        gelu = g.op(
            "Mul",
            [
                g.op("Mul", [mid, half]),
                g.op("Add", [g.op("Erf", [g.op("Div", [mid, sqrt2])]), one]),
            ],
        )
        out = g.linear(gelu, layer.ffn_out_w, layer.ffn_out_b, p + ".fo")
        x = g.op(
            "LayerNormalization",
            [
                g.op("Add", [x, out]),
                g.const(p + ".oln.w", layer.out_ln_w),
                g.const(p + ".oln.b", layer.out_ln_b),
            ],
            axis=-1,
            epsilon=cfg.layer_norm_eps,
        )
        if i + 1 in feature_layers:
            lower.append(pooled(x))

    g.nodes.append(helper.make_node("Identity", [pooled(x)], [ENCODER_OUTPUT], name="embedding"))
    g.nodes.append(
        helper.make_node(
            "Concat", [*lower, ENCODER_OUTPUT], [ENCODER_FEATURES], name="features", axis=-1
        )
    )

    graph = helper.make_graph(
        g.nodes,
        "e5_small_encoder",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "length"])
            for name in ENCODER_INPUTS
        ],
        [
            helper.make_tensor_value_info(ENCODER_OUTPUT, TensorProto.FLOAT, ["batch", cfg.hidden]),
            helper.make_tensor_value_info(
                ENCODER_FEATURES,
                TensorProto.FLOAT,
                ["batch", cfg.hidden * (len(set(feature_layers)) + 1)],
            ),
        ],
        initializer=g.used_inits(),
    )
    opsets = [helper.make_opsetid("", OPSET)]
    if fused:
        opsets.append(helper.make_opsetid(MS_DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="modelbuild")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def save_encoder(model: onnx.ModelProto, path: Path) -> None:
    """Write the model as one file (it stays under protobuf's 2 GB limit)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(model.SerializeToString())
    tmp.replace(path)
