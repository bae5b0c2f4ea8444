"""``stack.mlserver`` writes MLServer's settings for every served version of the text models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.settings import project_root
from stack.errors import NoModelsError
from stack.mlserver import RUNTIME, MLServerServer, text_models, write_settings

FIXTURE = project_root() / "tests" / "fixtures" / "model_repository"


def test_each_served_version_gets_its_settings_with_the_contracts_tensors(tmp_path: Path) -> None:
    """The fixture's two versions, each through the modelhost runtime naming the repository,
    model and version; tensors as the config declares them (HARMS for both: the config is the
    model's, as Triton's metadata is); the server on loopback, in one process, on the given
    ports."""
    written = write_settings(FIXTURE, tmp_path / "settings", (1, 2, 3))
    assert written == {"moderation": ["1", "2"]}
    server = json.loads((tmp_path / "settings" / "settings.json").read_text())
    assert (server["host"], server["http_port"], server["grpc_port"], server["metrics_port"]) == (
        "127.0.0.1",
        1,
        2,
        3,
    )
    assert server["parallel_workers"] == 0
    for version in ("1", "2"):
        path = tmp_path / "settings" / "moderation" / version / "model-settings.json"
        model = json.loads(path.read_text())
        assert model["implementation"] == RUNTIME
        assert model["parameters"]["version"] == version
        assert model["parameters"]["extra"] == {
            "repository": str(FIXTURE),
            "model": "moderation",
            "version": version,
        }
        assert model["inputs"] == [{"name": "TEXT", "datatype": "BYTES", "shape": [-1, 1]}]
        outputs = [(o["name"], o["shape"]) for o in model["outputs"]]
        assert outputs == [
            ("SENTIMENT", [-1, 3]),
            ("INTENT", [-1, 4]),
            ("TOXICITY", [-1, 3]),
            ("HARMS", [-1, 5]),
        ]


def test_only_python_models_with_one_text_input_are_served(tmp_path: Path) -> None:
    """Other backends and tensor inputs are left to Triton; none at all is ``NoModelsError``."""
    (tmp_path / "heads" / "1").mkdir(parents=True)
    (tmp_path / "heads" / "config.pbtxt").write_text(
        'backend: "onnxruntime"\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    (tmp_path / "ids" / "1").mkdir(parents=True)
    (tmp_path / "ids" / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "ids" data_type: TYPE_INT64 dims: [ 4 ] } ]\n'
    )
    assert text_models(tmp_path) == {}
    with pytest.raises(NoModelsError):
        write_settings(tmp_path, tmp_path / "settings", (1, 2, 3))


def test_down_stops_whichever_model_server_holds_the_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With MLServer chosen, ``down`` stops it and also a Triton of ours started before the
    setting changed (they share the ports); ``status`` names only the chosen one."""
    from stack.local_stack import LocalStack
    from stack.settings import StackSettings, StackToolSettings
    from stack.triton import TritonServer

    stopped: list[str] = []
    for cls in (MLServerServer, TritonServer):
        monkeypatch.setattr(cls, "stop", lambda self: stopped.append(self.name) or True)
    stack = LocalStack(
        StackToolSettings(stack=StackSettings(state_dir=tmp_path, inference_server="mlserver"))
    )
    assert isinstance(stack.services["triton"], MLServerServer)
    assert stack.down(["triton"]) == ["mlserver", "triton"]
    assert stopped == ["mlserver", "triton"]
