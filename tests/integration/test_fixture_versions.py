"""The fixture model's two versions on the stack's Triton: both served, the latest by default,
each finding one cue word the other does not (what version and shadow tests rely on), and only
version 2 answering the optional HARMS output."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pipelines.scores import HARM_LABELS, HARMS_OUTPUT, MODEL_INPUT, MODEL_OUTPUTS
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration


def _toxicity(
    client: grpcclient.InferenceServerClient, texts: list[str], version: str
) -> np.ndarray:
    data = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
    tensor = grpcclient.InferInput(MODEL_INPUT, list(data.shape), "BYTES")
    tensor.set_data_from_numpy(data)
    return client.infer("moderation", [tensor], model_version=version).as_numpy("TOXICITY")


def test_fixture_serves_two_versions_that_differ_by_one_cue_each(
    stack_settings: WorkerSettings,
) -> None:
    """Versions 1 and 2 are ready; ``dumb`` is offensive to version 2 only and ``scum`` to
    version 1 only; every other text scores the same; no version means version 2."""
    client = grpcclient.InferenceServerClient(stack_settings.triton.grpc_url)
    try:
        assert client.is_model_ready("moderation", "1")
        assert client.is_model_ready("moderation", "2")
        texts = ["you are dumb", "you are scum", "hello friends", "you idiot"]
        one, two, latest = (_toxicity(client, texts, v) for v in ("1", "2", ""))
    finally:
        client.close()
    offensive = 1
    assert one[0].argmax() == 0
    assert two[0].argmax() == offensive
    assert one[1].argmax() == offensive
    assert two[1].argmax() == 0
    assert np.array_equal(one[2:], two[2:])
    assert np.array_equal(latest, two)


def test_version_2_answers_harms_and_version_1_leaves_them_out(
    stack_settings: WorkerSettings,
) -> None:
    """Asked for the four outputs, version 2 answers HARMS ([n, 5], ``ambush`` raising the
    threat) and version 1 answers the three without it and without an error: the model's
    metadata declares HARMS for both."""
    client = grpcclient.InferenceServerClient(stack_settings.triton.grpc_url)
    try:
        declared = client.get_model_metadata("moderation", "1", as_json=True)["outputs"]
        assert HARMS_OUTPUT in {output["name"] for output in declared}
        texts = ["watch for the ambush tonight", "hello friends"]
        data = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
        tensor = grpcclient.InferInput(MODEL_INPUT, list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        asked = [grpcclient.InferRequestedOutput(n) for n in [*MODEL_OUTPUTS, HARMS_OUTPUT]]
        one, two = (
            client.infer("moderation", [tensor], model_version=v, outputs=asked) for v in "12"
        )
    finally:
        client.close()
    assert one.as_numpy(HARMS_OUTPUT) is None
    assert one.as_numpy("TOXICITY").shape == (2, 3)
    harms = two.as_numpy(HARMS_OUTPUT)
    assert harms.shape == (2, len(HARM_LABELS))
    assert harms[0].argmax() == HARM_LABELS.index("threat")
    assert harms[0].max() > 0.9
    assert harms[1].max() < 0.01
