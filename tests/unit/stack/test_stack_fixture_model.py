"""The test-only ``moderation`` fixture model honours the contract of pipelines/scores.py."""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from common.settings import project_root
from modelhost.pbtxt import read_model_config
from pipelines.scores import (
    HARM_LABELS,
    INTENT_LABELS,
    SENTIMENT_LABELS,
    TOXICITY_LABELS,
    ModelScores,
)

MODEL_DIR = project_root() / "tests" / "fixtures" / "model_repository" / "moderation"


@dataclass
class _Tensor:
    name: str
    array: Any

    def as_numpy(self) -> Any:
        return self.array


@dataclass
class _Response:
    output_tensors: list[_Tensor]


@dataclass
class _Request:
    inputs: dict[str, _Tensor]


def _fake_pb_utils() -> types.ModuleType:
    module = types.ModuleType("triton_python_backend_utils")
    module.Tensor = _Tensor  # type: ignore[attr-defined]
    module.InferenceResponse = _Response  # type: ignore[attr-defined]
    module.get_input_tensor_by_name = lambda request, name: request.inputs[name]  # type: ignore[attr-defined]
    return module


@pytest.fixture(scope="module")
def model_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The fixture's model.py, imported with a stand-in for Triton's backend utilities."""
    saved = sys.modules.get("triton_python_backend_utils")
    sys.modules["triton_python_backend_utils"] = _fake_pb_utils()
    try:
        spec = importlib.util.spec_from_file_location(
            "fixture_moderation", MODEL_DIR / "1" / "model.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("triton_python_backend_utils", None)
        else:
            sys.modules["triton_python_backend_utils"] = saved
    return module


def _run(model_module: Any, texts: list[str], version: str = "1") -> dict[str, Any]:
    batch = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
    model = model_module.TritonPythonModel()
    model.initialize({"model_version": version})  # as Triton does, with the version folder
    [response] = model.execute([_Request({"TEXT": _Tensor("TEXT", batch)})])
    return {tensor.name: tensor.array for tensor in response.output_tensors}


def _scores(outputs: dict[str, Any], row: int) -> ModelScores:
    harms = outputs.get("HARMS")
    return ModelScores(
        sentiment=tuple(float(x) for x in outputs["SENTIMENT"][row]),
        intent=tuple(float(x) for x in outputs["INTENT"][row]),
        toxicity=tuple(float(x) for x in outputs["TOXICITY"][row]),
        harms=None if harms is None else tuple(float(x) for x in harms[row]),
    )


def test_config_matches_contract() -> None:
    """config.pbtxt names model moderation, TEXT input, the three outputs and batching >= 128."""
    config = (MODEL_DIR / "config.pbtxt").read_text(encoding="utf-8")
    assert 'name: "moderation"' in config
    assert 'name: "TEXT"' in config
    assert "TYPE_STRING" in config
    for name, labels in (("SENTIMENT", SENTIMENT_LABELS), ("INTENT", INTENT_LABELS),
                         ("TOXICITY", TOXICITY_LABELS)):  # fmt: skip
        block = config.split(f'name: "{name}"', 1)[1].split("}", 1)[0]
        assert "TYPE_FP32" in block
        assert f"dims: [ {len(labels)} ]" in block
    max_batch = int(config.split("max_batch_size:", 1)[1].split()[0])
    assert max_batch >= 128
    assert "dynamic_batching" in config


def test_fixture_says_it_is_not_a_moderation_model(model_module: Any) -> None:
    """The docstring and the README state plainly that this is a test fixture."""
    assert "TEST FIXTURE, NOT A MODERATION MODEL" in model_module.__doc__
    assert "never a moderation model" in (MODEL_DIR / "README.md").read_text(encoding="utf-8")


def test_outputs_have_contract_shapes_and_sum_to_one(model_module: Any) -> None:
    """Every row has the label count of its task and passes ModelScores validation."""
    texts = ["hello", "you idiot", "buy now", "why?", "", "你好 世界"]
    outputs = _run(model_module, texts)
    assert outputs["SENTIMENT"].shape == (len(texts), 3)
    assert outputs["INTENT"].shape == (len(texts), 4)
    assert outputs["TOXICITY"].shape == (len(texts), 3)
    for name in ("SENTIMENT", "INTENT", "TOXICITY"):
        assert outputs[name].dtype == np.float32
    for row in range(len(texts)):
        _scores(outputs, row)  # raises ScoreRowError on a broken row


def test_cue_words_move_the_expected_labels(model_module: Any) -> None:
    """Fixed cue words make their label the most probable; a plain text stays benign."""
    texts = ["you stupid idiot", "they are vermin", "click here, winner", "big sale at my shop",
             "is it raining?", "thanks, great stream", "nice weather today"]  # fmt: skip
    outputs = _run(model_module, texts)
    labels = [_scores(outputs, row).labels() for row in range(len(texts))]
    assert labels[0]["toxicity"] == "offensive"
    assert labels[0]["sentiment"] == "negative"
    assert labels[1]["toxicity"] == "hate"
    assert labels[2]["intent"] == "spam"
    assert labels[3]["intent"] == "advertisement"
    assert labels[4]["intent"] == "question"
    assert labels[5]["sentiment"] == "positive"
    assert labels[6]["toxicity"] == "none"
    assert labels[6]["intent"] == "chat"


def test_deterministic_and_input_dependent(model_module: Any) -> None:
    """The same text scores the same every time; two different plain texts score differently."""
    first = _run(model_module, ["see you tomorrow", "the game starts at nine"])
    again = _run(model_module, ["see you tomorrow", "the game starts at nine"])
    for name in ("SENTIMENT", "INTENT", "TOXICITY"):
        np.testing.assert_array_equal(first[name], again[name])
        assert not np.array_equal(first[name][0], first[name][1])


def test_empty_batch_returns_empty_rows(model_module: Any) -> None:
    """A request with zero rows yields zero-row outputs of the right widths."""
    batch = np.zeros((0, 1), dtype=object)
    [response] = model_module.TritonPythonModel().execute(
        [_Request({"TEXT": _Tensor("TEXT", batch)})]
    )
    shapes = {tensor.name: tensor.array.shape for tensor in response.output_tensors}
    assert shapes == {"SENTIMENT": (0, 3), "INTENT": (0, 4), "TOXICITY": (0, 3)}


def test_each_version_finds_one_cue_the_other_does_not(model_module: Any) -> None:
    """Version 1 alone finds 'scum' offensive and version 2 alone 'dumb'; every other text
    scores the same in both, and version 2's file is version 1's (a link)."""
    texts = ["you are scum", "you are dumb", "you stupid idiot", "see you tomorrow"]
    one, two = _run(model_module, texts, "1"), _run(model_module, texts, "2")
    toxicity = {
        v: [_scores(out, r).labels()["toxicity"] for r in range(4)]
        for v, out in (("1", one), ("2", two))
    }
    assert toxicity["1"][:2] == ["offensive", "none"]
    assert toxicity["2"][:2] == ["none", "offensive"]
    for name in ("SENTIMENT", "INTENT", "TOXICITY"):
        assert np.array_equal(one[name][2:], two[name][2:])
    assert (MODEL_DIR / "2" / "model.py").resolve() == (MODEL_DIR / "1" / "model.py").resolve()
    assert "specific: { versions: [ 1, 2 ] }" in (MODEL_DIR / "config.pbtxt").read_text()


def test_the_config_declares_harms_with_its_label_file() -> None:
    """HARMS is declared FP32 [5] with ``harms_labels.txt``, whose lines are the contract's
    harm labels in order."""
    outputs = {o["name"]: o for o in read_model_config(MODEL_DIR / "config.pbtxt")["output"]}
    harms = outputs["HARMS"]
    assert (harms["data_type"], harms["dims"]) == ("TYPE_FP32", [len(HARM_LABELS)])
    assert harms["label_filename"] == "harms_labels.txt"
    assert tuple((MODEL_DIR / "harms_labels.txt").read_text().split()) == HARM_LABELS


def test_version_2_answers_harms_and_version_1_does_not(model_module: Any) -> None:
    """Version 2 adds HARMS (FP32, five valid probabilities a row); version 1 answers only the
    three outputs every model has, as a model built before HARMS; the three are the same in
    both for texts without a version's own cue."""
    texts = ["hello friends", "you muppet", "see you tomorrow"]
    one, two = _run(model_module, texts, "1"), _run(model_module, texts, "2")
    assert list(one) == ["SENTIMENT", "INTENT", "TOXICITY"]
    assert list(two) == ["SENTIMENT", "INTENT", "TOXICITY", "HARMS"]
    assert two["HARMS"].dtype == np.float32
    assert two["HARMS"].shape == (len(texts), len(HARM_LABELS))
    for row in range(len(texts)):
        assert _scores(two, row).harms is not None
        assert _scores(one, row).harms is None
    for name in ("SENTIMENT", "INTENT", "TOXICITY"):
        np.testing.assert_array_equal(one[name], two[name])


@pytest.mark.parametrize(("word", "label"), [
    ("muppet", "insult"), ("ambush", "threat"), ("despair", "self_harm"),
    ("plunge", "self_harm_incitement"), ("flirt", "sexual_solicitation"),
])  # fmt: skip
def test_each_harm_cue_raises_its_harm_alone(model_module: Any, word: str, label: str) -> None:
    """A harm's cue word takes it to 0.92-0.97 (over the 0.5 flag thresholds, under the insult
    block); the other harms, and every harm of a text without a cue, stay under 0.01."""
    outputs = _run(model_module, [f"well {word} then", "well then"], "2")
    cued, plain = _scores(outputs, 0).harms, _scores(outputs, 1).harms
    assert cued is not None
    assert plain is not None
    for index, name in enumerate(HARM_LABELS):
        if name == label:
            assert 0.92 <= cued[index] < 0.97
        else:
            assert cued[index] < 0.01
    assert max(plain) < 0.01


def test_an_empty_batch_of_version_2_has_an_empty_harms_output(model_module: Any) -> None:
    """Zero rows: HARMS is there too, with zero rows of five."""
    assert _run(model_module, [], "2")["HARMS"].shape == (0, len(HARM_LABELS))
