"""Computes numbers for the instruction-set tests, in a process of its own (so it can run under
qemu or with AMX refused); results go to an ``.npz`` file.

    probe.py products OUT            uint8 x int8 products with 7-bit and 8-bit weights
    probe.py encoder MODEL IN OUT    an encoder's features for the ids and mask in IN
    probe.py pipeline CONFIG OUT     the served moderation pipeline's probabilities

Every result also records whether this process could enable AMX.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


def _amx_permitted() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA)) == 0


def _products() -> dict[str, Any]:
    """``MatMulIntegerToFloat`` with activations near 255 (zero point 128) against weights of
    magnitude up to 64 and up to 127, beside the exact integer result of each."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    a = rng.integers(200, 256, size=(64, 256)).astype(np.uint8)
    out: dict[str, Any] = {}
    for name, limit in (("w64", 64), ("w127", 127)):
        w = rng.integers(-limit, limit + 1, size=(256, 128)).astype(np.int8)
        node = helper.make_node(
            "MatMulIntegerToFloat", ["a", "w", "one", "ones", "zp"], ["y"], domain="com.microsoft"
        )
        inits = [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(np.array(1, np.float32), "one"),
            numpy_helper.from_array(np.ones(128, np.float32), "ones"),
            numpy_helper.from_array(np.array(128, np.uint8), "zp"),
        ]
        graph = helper.make_graph(
            [node],
            "products",
            [helper.make_tensor_value_info("a", TensorProto.UINT8, list(a.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            initializer=inits,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
        )
        model.ir_version = 9
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        out[name] = session.run(None, {"a": a})[0]
        out[name + "_exact"] = ((a.astype(np.int64) - 128) @ w.astype(np.int64)).astype(np.float64)
    return out


def _encoder(model: str, inputs: str) -> dict[str, Any]:
    import onnxruntime as ort

    feed = dict(np.load(inputs))
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return {"features": session.run(["features"], feed)[0]}


def _pipeline(config: str) -> dict[str, Any]:
    """``config`` is a JSON file: ``args`` (Triton's initialize arguments) and ``texts``."""
    from modelbuild.serving.pipeline_model import TritonPythonModel

    spec = json.loads(Path(config).read_text(encoding="utf-8"))
    served = TritonPythonModel()
    served.initialize(spec["args"])
    return served.scores(list(spec["texts"]))


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "products":
        result, target = _products(), rest[0]
    elif command == "encoder":
        result, target = _encoder(rest[0], rest[1]), rest[2]
    elif command == "pipeline":
        result, target = _pipeline(rest[0]), rest[1]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    np.savez(target, amx_permitted=np.array(_amx_permitted()), **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
