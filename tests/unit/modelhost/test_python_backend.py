"""``modelhost.python_backend`` runs a Triton Python-backend ``model.py`` as Triton would."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from common.settings import project_root
from modelhost.python_backend import (
    ModelFailed,
    ModelLoadError,
    ModelRefused,
    PythonBackendModel,
    served_versions,
)
from modelhost.triton_utils import TritonError

FIXTURE = project_root() / "tests" / "fixtures" / "model_repository"

_ECHO = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        self.config = json.loads(args["model_config"])

    def execute(self, requests):
        out = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            if any(t == b"raise" for t in texts):
                raise RuntimeError("boom")
            if any(t == b"refuse" for t in texts):
                error = pb_utils.TritonError("no", pb_utils.TritonError.INVALID_ARG)
                out.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
                continue
            lengths = np.array([[len(t)] for t in texts], dtype=np.float32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("LENGTH", lengths)]))
        return out
"""


def _repository(tmp_path: Path, policy: str = "", versions: tuple[str, ...] = ("1",)) -> Path:
    folder = tmp_path / "echo"
    for version in versions:
        (folder / version).mkdir(parents=True)
        (folder / version / "model.py").write_text(_ECHO, encoding="utf-8")
    (folder / "config.pbtxt").write_text(
        f'backend: "python"\nmax_batch_size: 8\n{policy}\n'
        'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
        'output [ { name: "LENGTH" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'parameters: { key: "p" value: { string_value: "v" } }\n',
        encoding="utf-8",
    )
    return tmp_path


def test_the_fixture_model_runs_unchanged_with_its_two_versions() -> None:
    """The fixture's own model.py (it imports ``triton_python_backend_utils``): no version
    loads 2, the latest its policy serves; ``dumb`` is offensive to 2 alone, ``scum`` to 1."""
    latest = PythonBackendModel(FIXTURE, "moderation")
    one = PythonBackendModel(FIXTURE, "moderation", "1")
    try:
        assert (latest.version, latest.versions, one.version) == ("2", ["1", "2"], "1")
        texts = ["you are dumb", "you are scum"]
        assert latest.infer(texts)["TOXICITY"].argmax(axis=1).tolist() == [1, 0]
        assert one.infer(texts)["TOXICITY"].argmax(axis=1).tolist() == [0, 1]
        assert list(latest.infer(texts)) == ["SENTIMENT", "INTENT", "TOXICITY", "HARMS"]
        # version 1 leaves the declared HARMS out, as Triton's response would
        assert list(one.infer(texts)) == ["SENTIMENT", "INTENT", "TOXICITY"]
    finally:
        latest.close()
        one.close()


def test_initialize_gets_tritons_arguments(tmp_path: Path) -> None:
    """``model_config`` as JSON with the parameters map, the model folder, version and kind."""
    model = PythonBackendModel(_repository(tmp_path), "echo")
    args = model._model.args
    assert args["model_repository"] == str(tmp_path / "echo")
    assert (args["model_version"], args["model_name"], args["model_instance_kind"]) == (
        "1",
        "echo",
        "CPU",
    )
    config = json.loads(args["model_config"])
    assert config["parameters"] == {"p": {"string_value": "v"}}
    np.testing.assert_array_equal(model.infer(["ab", "abcd"])["LENGTH"], [[2.0], [4.0]])


def test_an_error_response_and_a_raising_model_are_typed(tmp_path: Path) -> None:
    """An error response is ``ModelRefused`` with Triton's code; a raise is ``ModelFailed``."""
    model = PythonBackendModel(_repository(tmp_path), "echo")
    with pytest.raises(ModelRefused) as refused:
        model.infer(["ok", "refuse"])
    assert refused.value.code == TritonError.INVALID_ARG
    with pytest.raises(ModelFailed):
        model.infer(["raise"])


@pytest.mark.parametrize(
    ("policy", "on_disk", "served"),
    [
        ("", ("1", "2", "3"), ["3"]),
        ("version_policy: { latest: { num_versions: 2 } }", ("1", "2", "3"), ["2", "3"]),
        ("version_policy: { all: {} }", ("1", "3"), ["1", "3"]),
        ("version_policy: { specific: { versions: [ 1, 4 ] } }", ("1", "2"), ["1"]),
    ],
)
def test_served_versions_follow_the_version_policy(
    tmp_path: Path, policy: str, on_disk: tuple[str, ...], served: list[str]
) -> None:
    """latest (default one), latest N, all, and specific (only those on disk)."""
    repository = _repository(tmp_path, policy, on_disk)
    model = PythonBackendModel(repository, "echo")
    assert served_versions(repository / "echo", model.config) == served
    assert model.version == served[-1]


def test_what_cannot_be_loaded_is_a_load_error(tmp_path: Path) -> None:
    """No such model, a version not served, a broken model.py: ``ModelLoadError``."""
    repository = _repository(tmp_path)
    with pytest.raises(ModelLoadError, match="no model"):
        PythonBackendModel(repository, "missing")
    with pytest.raises(ModelLoadError, match="version 2 not served"):
        PythonBackendModel(repository, "echo", "2")
    (repository / "echo" / "1" / "model.py").write_text("import nothing_of_the_kind\n")
    with pytest.raises(ModelLoadError, match="import failed"):
        PythonBackendModel(repository, "echo")
