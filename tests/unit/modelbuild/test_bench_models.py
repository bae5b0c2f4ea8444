"""``bench.models`` helpers: the in-process ceiling is set up from the served model's config, and
the batch-100 comparison alternates the two paths."""

from __future__ import annotations

import json
import time

from bench.models import _interleaved, _model_args
from common.settings import project_root

REPOSITORY = project_root() / "model_repository"


def test_model_args_carry_the_served_config() -> None:
    """The ceiling runs with exactly the files and outputs ``moderation/config.pbtxt`` names."""
    args = _model_args(REPOSITORY, "moderation")
    config = json.loads(args["model_config"])
    assert args["model_repository"] == str(REPOSITORY / "moderation")
    assert [(o["name"], o["dims"]) for o in config["output"]] == [
        ("SENTIMENT", [3]),
        ("INTENT", [4]),
        ("TOXICITY", [3]),
        ("HARMS", [5]),
    ]
    params = {k: v["string_value"] for k, v in config["parameters"].items()}
    assert params["sentiment_file"] == "heads/sentiment.onnx"
    assert params["toxicity_file"] == "heads/toxicity.onnx"
    assert params["max_length"] == "64"


def test_interleaved_alternates_and_times_each_path() -> None:
    """Each batch runs on the first path then the second; a path that sleeps twice as long per
    batch comes out at a clearly lower rate (about half)."""
    calls: list[str] = []

    def fast(batch: list[str]) -> None:
        calls.append("fast")
        time.sleep(0.01)

    def slow(batch: list[str]) -> None:
        calls.append("slow")
        time.sleep(0.02)

    batches = [["m"] * 10 for _ in range(5)]
    fast_rate, slow_rate = _interleaved(fast, slow, batches)
    assert calls == ["fast", "slow"] * 6  # one warm-up each, then alternating
    assert 1.2 < fast_rate / slow_rate < 3.0


def test_cpu_model_bench_runs_both_encoders_and_compares_them() -> None:
    """The served config names the CPU file the bench compares with float32, and the bench's
    agreement finds the largest and 99th-percentile probability gaps and the top-class changes."""
    import numpy as np

    from bench.cpu_model import agreement

    a = {"X": np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8]])}
    b = {"X": np.array([[0.8, 0.2], [0.7, 0.3], [0.1, 0.9]])}
    largest, p99, changes = agreement(a, b)["X"]
    assert abs(largest - 0.3) < 1e-9
    assert 0.1 < p99 <= largest
    assert changes == 1
    params = json.loads(_model_args(REPOSITORY, "moderation")["model_config"])["parameters"]
    assert params["cpu_encoder_file"]["string_value"] == "../encoder/1/tuned_cpu.onnx"
