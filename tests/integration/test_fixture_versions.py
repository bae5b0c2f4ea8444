"""The fixture model's two versions on the stack's Triton: both served, the latest by default,
and each finding one cue word the other does not (what version and shadow tests rely on)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pipelines.scores import MODEL_INPUT
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
