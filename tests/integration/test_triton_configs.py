"""One setting selects the configs Triton serves: ``stack.triton_model_config`` passes
``--model-config-name``, and a model with ``configs/<name>.pbtxt`` is served by it.

The shipped ``configs/gpu.pbtxt`` (``KIND_GPU``) cannot load on this CPU-only server, so the
selection is shown with a config of the same mechanism: a copy of the fixture whose
``configs/pinned.pbtxt`` serves version 1 alone. The GPU configs themselves were not run here
(BENCHMARKS.md); their content is checked in tests/unit/modelbuild/test_gpu_configs.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from common.settings import project_root
from pipelines.scores import MODEL_INPUT
from stack import private_triton
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration

FIXTURE = project_root() / "tests" / "fixtures" / "model_repository"


def _latest_version_and_dumb(endpoint: str) -> tuple[str, int]:
    client = grpcclient.InferenceServerClient(endpoint)
    try:
        data = np.array([[b"you are dumb"]], dtype=object)
        tensor = grpcclient.InferInput(MODEL_INPUT, list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        result = client.infer("moderation", [tensor])
        version = str(result.get_response().model_version)
        return version, int(result.as_numpy("TOXICITY")[0].argmax())
    finally:
        client.close()


@pytest.mark.parametrize(("name", "expected"), [("", ("2", 1)), ("pinned", ("1", 0))])
def test_the_model_config_setting_selects_the_configs_file(
    tmp_path: Path, name: str, expected: tuple[str, int]
) -> None:
    """Without the setting Triton serves config.pbtxt (versions 1 and 2, latest 2: ``dumb``
    offensive); with ``pinned`` it serves configs/pinned.pbtxt (version 1 alone: not)."""
    repository = tmp_path / "repository"
    shutil.copytree(FIXTURE, repository, symlinks=True)
    folder = repository / "moderation"
    (folder / "configs").mkdir()
    (folder / "configs" / "pinned.pbtxt").write_text(
        (folder / "config.pbtxt").read_text().replace("versions: [ 1, 2 ]", "versions: [ 1 ]")
    )
    with private_triton(repository, tmp_path / "state", free_ports(3), model_config=name) as t:
        assert _latest_version_and_dumb(t.endpoint) == expected
