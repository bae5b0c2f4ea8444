"""The CPU encoder: the fused encoder graph with its matrix products in int8.

The GPU keeps the float32 graph (``encoder/1/model.onnx``); on CPU the moderation models run
``encoder/1/model_cpu.onnx``, written here from the same weights in three steps:

1. the blocks as onnxruntime's fused contrib operators (:func:`build_encoder` with
   ``fused=True``; checked against the numpy reference like the float32 graph);
2. dynamic int8 quantisation with ``onnxruntime.quantization``: the weight matrices (the fused
   Q/K/V of ``Attention`` included, which becomes ``QAttention``) as signed int8 with one scale
   per output channel; activations are quantised per batch at run time, so no calibration set is
   needed and nothing depends on data. Three feed-forward output projections stay float32
   (:data:`FLOAT_WEIGHTS`, blocks 1, 5 and 6): their input, a GELU output, has channels 46-93
   times the median, which a per-tensor int8 scale crushes. Measured on 63 chat and probe
   lines, mean 1 - cosine of the embedding to float32: all int8 0.0031; block 5's projection
   alone float32 0.0017; blocks 1, 5, 6 0.0012; all twelve 0.0009 (but about 1.6x slower than
   all int8 instead of about 1.1x). SmoothQuant-style scaling of those channels into the weights
   was tried and did not help (0.0032);
3. a closeness check against the float32 reference on a few texts (the build fails below
   :data:`MIN_COSINE`).

Same inputs and outputs as the float32 graph (``embedding`` and ``features``), so the heads read
either. Deterministic: the same weights give the same file, byte for byte.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx

from modelbuild.e5_weights import E5Weights
from modelbuild.encoder_graph import FEATURE_LAYERS, build_encoder

__all__ = [
    "FLOAT_WEIGHTS",
    "MIN_COSINE",
    "QUANTISED_OPS",
    "build_cpu_encoder",
    "min_part_cosine",
    "quantise",
]

QUANTISED_OPS = ("MatMul", "Attention")
"""Operators whose constant weights become int8 (everything else stays float32)."""
FLOAT_WEIGHTS = ("l0.fo.weight_t", "l4.fo.weight_t", "l5.fo.weight_t")
"""Weights whose matrix product stays float32: the feed-forward output of blocks 1, 5 and 6."""
MIN_COSINE = 0.98
"""Lowest cosine between a CPU-encoder vector and the float32 one (each 384-wide part of
``features``) that the build accepts."""

F32 = npt.NDArray[np.float32]


def quantise(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the weights of :data:`QUANTISED_OPS` in int8, per output channel, except
    those named in :data:`FLOAT_WEIGHTS`."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    kept = [
        node.name
        for node in model.graph.node
        if node.op_type in QUANTISED_OPS and any(i in FLOAT_WEIGHTS for i in node.input)
    ]
    with tempfile.TemporaryDirectory(prefix="modstream-quant-") as tmp:
        target = Path(tmp) / "model.onnx"
        quantize_dynamic(
            model,
            target,
            op_types_to_quantize=list(QUANTISED_OPS),
            per_channel=True,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=kept,
            # Contrib operators have no ONNX shape inference; their outputs are float32.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return onnx.load(str(target))


def build_cpu_encoder(
    weights: E5Weights, feature_layers: tuple[int, ...] = FEATURE_LAYERS
) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The fused float32 graph (for the reference check) and its int8 version (to save)."""
    fused = build_encoder(weights, feature_layers, fused=True)
    return fused, quantise(fused)


def min_part_cosine(got: F32, want: F32, width: int) -> float:
    """The lowest cosine between matching ``width``-wide parts of two ``features`` matrices."""
    a = got.reshape(got.shape[0], -1, width).astype(np.float64)
    b = want.reshape(want.shape[0], -1, width).astype(np.float64)
    dots = (a * b).sum(axis=-1)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return float((dots / np.maximum(norms, 1e-12)).min())
