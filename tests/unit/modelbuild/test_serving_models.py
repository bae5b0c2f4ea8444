"""The Python-backend model sources, run against a stand-in for Triton's ``pb_utils``."""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from modelbuild.heads import Dense, Head, save_head


class _Tensor:
    def __init__(self, name: str, value: np.ndarray) -> None:
        self.name = name
        self.value = value

    def as_numpy(self) -> np.ndarray:
        return self.value


class _Response:
    def __init__(self, output_tensors: list[_Tensor]) -> None:
        self.outputs = {t.name: t.value for t in output_tensors}


class _Request:
    def __init__(self, **inputs: np.ndarray) -> None:
        self.inputs = inputs


def _fake_pb_utils() -> types.ModuleType:
    mod = types.ModuleType("triton_python_backend_utils")
    mod.Tensor = _Tensor  # type: ignore[attr-defined]
    mod.InferenceResponse = _Response  # type: ignore[attr-defined]
    mod.get_input_tensor_by_name = (  # type: ignore[attr-defined]
        lambda request, name: _Tensor(name, request.inputs[name])
    )
    mod.triton_string_to_numpy = lambda t: {"TYPE_FP32": np.float32}[t]  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def serving(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _fake_pb_utils())
    modules = {
        name: importlib.reload(importlib.import_module(f"modelbuild.serving.{name}"))
        for name in ("onnx_model", "tokenizer_model")
    }
    yield modules
    for name in modules:
        sys.modules.pop(f"modelbuild.serving.{name}", None)


def _config(outputs: list[tuple[str, str]], **params: str) -> str:
    return json.dumps(
        {
            "output": [{"name": n, "data_type": t} for n, t in outputs],
            "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
            "parameters": {k: {"string_value": v} for k, v in params.items()},
        }
    )


def test_onnx_model_runs_a_batch_of_requests_and_splits_it(
    serving: dict[str, Any], tmp_path: Path
) -> None:
    """Several requests are run as one batch and each gets back exactly its own rows."""
    weight = np.eye(4, 3, dtype=np.float32) * 5
    save_head(Head((Dense(weight, np.zeros(3, np.float32)),)), "t", tmp_path / "1" / "model.onnx")
    model = serving["onnx_model"].TritonPythonModel()
    model.initialize(
        {
            "model_config": _config([("probabilities", "TYPE_FP32")]),
            "model_repository": str(tmp_path),
            "model_version": "1",
        }
    )
    a = np.array([[1, 0, 0, 0]], dtype=np.float32)
    b = np.array([[0, 1, 0, 0], [0, 0, 1, 0]], dtype=np.float32)
    responses = model.execute([_Request(embedding=a), _Request(embedding=b)])
    assert [r.outputs["probabilities"].shape for r in responses] == [(1, 3), (2, 3)]
    assert responses[0].outputs["probabilities"].argmax(axis=1).tolist() == [0]
    assert responses[1].outputs["probabilities"].argmax(axis=1).tolist() == [1, 2]
    assert np.allclose(responses[1].outputs["probabilities"].sum(axis=1), 1.0)


def test_trim_padding_drops_only_all_padding_columns(serving: dict[str, Any]) -> None:
    """Columns that are padding in every row go; the embedding-free inputs keep their shape."""
    trim = serving["onnx_model"]._trim_padding
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=np.int64)
    ids = np.arange(10, dtype=np.int64).reshape(2, 5)
    out = trim({"input_ids": ids, "attention_mask": mask})
    assert out["attention_mask"].shape == (2, 3)
    assert out["input_ids"].tolist() == [[0, 1, 2], [5, 6, 7]]


def test_tokenizer_model_pads_to_fixed_length_with_prefix(
    serving: dict[str, Any], tmp_path: Path
) -> None:
    """Every row has max_length ids, the e5 prefix is added, and bad UTF-8 is tolerated."""
    vocab = {
        "<s>": 0,
        "<pad>": 1,
        "</s>": 2,
        "<unk>": 3,
        "query": 4,
        ":": 7,
        "hello": 5,
        "world": 6,
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "1").mkdir()
    tok.save(str(tmp_path / "1" / "tokenizer.json"))
    model = serving["tokenizer_model"].TritonPythonModel()
    model.initialize(
        {
            "model_config": _config([], max_length="6", prefix="query: "),
            "model_repository": str(tmp_path),
            "model_version": "1",
        }
    )
    texts = np.array([[b"hello world"], [b"\xff\xfe hello"]], dtype=object)
    (response,) = model.execute([_Request(TEXT=texts)])
    ids = response.outputs["input_ids"]
    mask = response.outputs["attention_mask"]
    assert ids.shape == mask.shape == (2, 6)
    assert ids[0].tolist() == [4, 7, 5, 6, 1, 1]
    assert mask[0].tolist() == [1, 1, 1, 1, 0, 0]
    assert ids[1][:2].tolist() == [4, 7]
    assert 5 in ids[1].tolist()
