"""Write the e5 encoder as an ONNX graph with ``onnx.helper``; no deep-learning framework needed.

Inputs ``input_ids`` and ``attention_mask`` (INT64 ``[batch, length]``). Outputs ``embedding``
(FP32 ``[batch, 384]``: the last block's states mean-pooled over the mask and L2-normalised, as
e5 is trained) and ``features`` (FP32 ``[batch, 384 * (len(FEATURE_LAYERS) + 1)]``: the same
pooling of the blocks in ``FEATURE_LAYERS``, each L2-normalised, then ``embedding``; lower blocks
keep more of the wording, which heads such as sentiment use). The word embedding stays
4-bit inside the graph (Gather on packed nibbles, unpacked with bit operations) so the file is
about 140 MB instead of 520 MB; the transformer blocks are dequantised to float32.

:func:`build_encoder` writes the portable graph: standard ONNX operators only, what the GPU and
any runtime can run, served as ``encoder/1/model.onnx``. :func:`assemble` is the skeleton it is
made of (embeddings, pooling, outputs) with the transformer block passed in, so the CPU encoder
(:mod:`modelbuild.cpu_encoder`) writes its own blocks around the same embedding and pooling.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
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
    "MASK_NEG",
    "MS_DOMAIN",
    "OPSET",
    "Block",
    "Graph",
    "Masks",
    "assemble",
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
"""onnxruntime's contrib operators (the CPU encoder's attention and GELU)."""
MASK_NEG = -10000.0
"""What a padded key adds to the attention scores before the softmax."""


class Graph:
    """Accumulates nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._consts: set[str] = set()
        self._n = 0

    def const(self, name: str, value: npt.NDArray[np.generic]) -> str:
        """An initialiser; a name given twice keeps its first value (shared constants)."""
        if name not in self._consts:
            self._consts.add(name)
            self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        return self.ops(op_type, inputs, 1, domain, **attrs)[0]

    def ops(
        self, op_type: str, inputs: list[str], outputs: int, domain: str = "", **attrs: Any
    ) -> list[str]:
        """A node with ``outputs`` outputs (``Split``, ``DynamicQuantizeLinear``)."""
        self._n += 1
        name = f"{op_type.lower()}_{self._n}"
        outs = [name] if outputs == 1 else [f"{name}_{i}" for i in range(outputs)]
        node = helper.make_node(op_type, inputs, outs, name=name, **attrs)
        if domain:
            node.domain = domain
        self.nodes.append(node)
        return outs

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

    def layer_norm(
        self, x: str, w: npt.NDArray[np.float32], b: npt.NDArray[np.float32], p: str, eps: float
    ) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const(p + ".w", w), self.const(p + ".b", b)],
            axis=-1,
            epsilon=eps,
        )

    def scalar(self, value: float) -> str:
        """A shared float32 scalar constant."""
        return self.const(f"c.f_{value!r}", np.array(value, dtype=np.float32))

    def ints(self, *values: int) -> str:
        """A shared int64 vector constant (axes, shapes)."""
        return self.const("c.i64_" + "_".join(map(str, values)), np.array(values, dtype=np.int64))


class Masks:
    """The attention mask in the forms the blocks read, each made on first use."""

    def __init__(self, g: Graph) -> None:
        self._g = g

    @cached_property
    def float(self) -> str:
        """``[batch, length]`` float32, 1 for a token and 0 for padding."""
        return self._g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)

    @cached_property
    def int32(self) -> str:
        """``[batch, length]`` int32 (what onnxruntime's attention operators read)."""
        return self._g.op("Cast", ["attention_mask"], to=TensorProto.INT32)

    @cached_property
    def additive(self) -> str:
        """``[batch, 1, 1, length]``: 0 for a token, :data:`MASK_NEG` for padding."""
        g = self._g
        padding = g.op("Sub", [g.scalar(1.0), self.float])
        bias = g.op("Mul", [padding, g.scalar(MASK_NEG)])
        return g.op("Unsqueeze", [bias, g.ints(1, 2)])


Block = Callable[[Graph, str, E5Layer, str, Masks, E5Config], str]
"""Writes one transformer block: ``(graph, states, layer, name prefix, masks, config)`` in, the
block's output states out (``[batch, length, hidden]``)."""


def _embedded(g: Graph, weights: E5Weights) -> str:
    """Word (4-bit, unpacked in the graph) + position + token type embeddings, LayerNormed."""
    cfg = weights.config
    blocks = cfg.hidden // 32
    nib = g.op("Gather", [g.const("emb.word.nibbles", weights.word_nibbles), "input_ids"])
    low = g.op("BitwiseAnd", [nib, g.const("c.u8_15", np.array(15, dtype=np.uint8))])
    high = g.op(
        "BitShift", [nib, g.const("c.u8_4", np.array(4, dtype=np.uint8))], direction="RIGHT"
    )
    vals = g.op("Cast", [g.op("Concat", [low, high], axis=-1)], to=TensorProto.FLOAT)
    vals = g.op("Sub", [vals, g.scalar(8.0)])
    scales = g.const("emb.word.scales", weights.word_scales.reshape(-1, blocks, 1))
    vals = g.op("Mul", [vals, g.op("Gather", [scales, "input_ids"])])
    word = g.op("Reshape", [vals, g.ints(0, 0, cfg.hidden)])
    # Positions 0..length-1 of the (padding-row-free) table, plus token type 0.
    length = g.op("Gather", [g.op("Shape", ["input_ids"]), g.ints(1)])
    pos = g.op("Slice", [g.const("emb.pos", weights.positions), g.ints(0), length, g.ints(0)])
    x = g.op("Add", [g.op("Add", [word, pos]), g.const("emb.type", weights.token_type)])
    return g.layer_norm(x, weights.emb_ln_w, weights.emb_ln_b, "emb.ln", cfg.layer_norm_eps)


def _pooled(g: Graph, states: str, masks: Masks) -> str:
    """Mean over the unmasked positions, L2-normalised."""
    mask3 = g.op("Unsqueeze", [masks.float, g.ints(2)])
    count = g.op("ReduceSum", [masks.float, g.ints(1)], keepdims=1)
    summed = g.op("ReduceSum", [g.op("Mul", [states, mask3]), g.ints(1)], keepdims=0)
    mean = g.op("Div", [summed, count])
    norm = g.op("Max", [g.op("ReduceL2", [mean, g.ints(-1)], keepdims=1), g.scalar(1e-12)])
    return g.op("Div", [mean, norm])


def assemble(
    weights: E5Weights,
    feature_layers: tuple[int, ...],
    block: Block,
    *,
    name: str = "e5_small_encoder",
    contrib: bool = False,
) -> onnx.ModelProto:
    """The encoder with ``block`` written for every transformer block, around the shared
    embedding, pooling and outputs; ``contrib`` declares onnxruntime's operator domain.
    Checked by ``onnx.checker`` before it is returned."""
    if any(not 1 <= n <= len(weights.layers) for n in feature_layers):
        raise ValueError(f"feature layers {feature_layers} outside 1..{len(weights.layers)}")
    cfg = weights.config
    g = Graph()
    masks = Masks(g)
    x = _embedded(g, weights)
    lower: list[str] = []
    for i, layer in enumerate(weights.layers):
        x = block(g, x, layer, f"l{i}", masks, cfg)
        if i + 1 in feature_layers:
            lower.append(_pooled(g, x, masks))
    g.nodes.append(
        helper.make_node("Identity", [_pooled(g, x, masks)], [ENCODER_OUTPUT], name="embedding")
    )
    g.nodes.append(
        helper.make_node(
            "Concat", [*lower, ENCODER_OUTPUT], [ENCODER_FEATURES], name="features", axis=-1
        )
    )
    graph = helper.make_graph(
        g.nodes,
        name,
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "length"])
            for n in ENCODER_INPUTS
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
    if contrib:
        opsets.append(helper.make_opsetid(MS_DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="modelbuild")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _portable_block(g: Graph, x: str, layer: E5Layer, p: str, masks: Masks, cfg: E5Config) -> str:
    """One post-LayerNorm BERT block in standard operators, exact (erf) GELU."""
    head_dim = cfg.hidden // cfg.heads
    split = g.ints(0, 0, cfg.heads, head_dim)

    def heads(w: npt.NDArray[np.float32], b: npt.NDArray[np.float32], name: str) -> str:
        return g.op("Reshape", [g.linear(x, w, b, p + name), split])

    q = g.op("Transpose", [heads(layer.q_w, layer.q_b, ".q")], perm=[0, 2, 1, 3])
    k = g.op("Transpose", [heads(layer.k_w, layer.k_b, ".k")], perm=[0, 2, 3, 1])
    v = g.op("Transpose", [heads(layer.v_w, layer.v_b, ".v")], perm=[0, 2, 1, 3])
    scores = g.op("Mul", [g.op("MatMul", [q, k]), g.scalar(1.0 / math.sqrt(head_dim))])
    scores = g.op("Add", [scores, masks.additive])
    ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), g.ints(0, 0, cfg.hidden)])
    attn = g.linear(ctx, layer.attn_out_w, layer.attn_out_b, p + ".ao")
    eps = cfg.layer_norm_eps
    x = g.layer_norm(g.op("Add", [x, attn]), layer.attn_ln_w, layer.attn_ln_b, p + ".aln", eps)
    mid = g.linear(x, layer.ffn_in_w, layer.ffn_in_b, p + ".fi")
    erf = g.op("Erf", [g.op("Div", [mid, g.scalar(math.sqrt(2.0))])])
    gelu = g.op("Mul", [g.op("Mul", [mid, g.scalar(0.5)]), g.op("Add", [erf, g.scalar(1.0)])])
    out = g.linear(gelu, layer.ffn_out_w, layer.ffn_out_b, p + ".fo")
    return g.layer_norm(g.op("Add", [x, out]), layer.out_ln_w, layer.out_ln_b, p + ".oln", eps)


def build_encoder(
    weights: E5Weights, feature_layers: tuple[int, ...] = FEATURE_LAYERS
) -> onnx.ModelProto:
    """The portable encoder graph for ``weights`` (standard ONNX operators only).

    ``feature_layers`` (1-based block numbers, each at most the number of blocks) are pooled into
    ``features`` ahead of the embedding."""
    return assemble(weights, feature_layers, _portable_block)


def save_encoder(model: onnx.ModelProto, path: Path) -> None:
    """Write the model as one file (it stays under protobuf's 2 GB limit)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(model.SerializeToString())
    tmp.replace(path)
