"""The real CPU encoder, in the served moderation pipeline, on every instruction-set path this
machine can show: natively, on an emulated AVX2-only CPU (qemu) and, with AMX, with AMX refused.

Needs ``modstream models build`` first. Each path's head probabilities must be within the
moderation models' bound (0.02) of native float32, and within 0.005 of the native CPU encoder's
(what differs between kernels is float rounding before a quantiser, never an integer product).
Emulation is slow (the CPU encoder runs about 200x slower under qemu), so a dozen probes
stand for the probe file here; ``python -m bench.cpu_model --isa`` measures them all.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.instruction_sets.targets import available_targets, run_script
from common.settings import project_root
from modelbuild.serving.pipeline_model import read_probes
from modelbuild.whole_decision import served_config

pytestmark = pytest.mark.integration

REPOSITORY = project_root() / "model_repository"
PROBE = project_root() / "bench" / "instruction_sets" / "probe.py"
BOUND = 0.02
ACROSS_KERNELS = 0.005


def _encoders(model: str) -> dict[str, str]:
    """``model``'s float32 and CPU encoder files, as its config names them."""
    params = json.loads(served_config(REPOSITORY, model)["model_config"])["parameters"]
    return {
        "float32": params["encoder_file"]["string_value"],
        "cpu": params["cpu_encoder_file"]["string_value"],
    }


def _spec(tmp_path: Path, model: str, encoder: str, texts: list[str], name: str) -> Path:
    """A probe.py pipeline spec: ``model`` as served, running ``encoder`` (a path relative to
    the model's folder) with no load check."""
    args = served_config(REPOSITORY, model)
    config = json.loads(args["model_config"])
    params = config["parameters"]
    params["encoder_file"] = {"string_value": encoder}
    params.pop("cpu_encoder_file")
    params["intra_op_threads"] = {"string_value": "2"}
    spec = tmp_path / f"{name}.json"
    spec.write_text(
        json.dumps({"args": {**args, "model_config": json.dumps(config)}, "texts": texts}),
        encoding="utf-8",
    )
    return spec


def test_cpu_encoder_probabilities_agree_on_every_instruction_set(tmp_path: Path) -> None:
    """On each path the served pipeline with the CPU encoder gives every head probability of a
    dozen probes within 0.02 of native float32 and within 0.005 of the native CPU encoder."""
    encoders = _encoders("moderation")
    assert (REPOSITORY / "moderation" / encoders["cpu"]).is_file(), "run models build"
    texts = read_probes(REPOSITORY / "encoder" / "probes.jsonl")[::12]
    targets = available_targets(tmp_path / "noamx")
    results: dict[str, dict[str, np.ndarray]] = {}
    jobs = [("native", encoders["float32"], "float32")] + [
        (t.name, encoders["cpu"], "cpu") for t in targets
    ]
    by_name = {t.name: t for t in targets}
    for target_name, encoder, label in jobs:
        spec = _spec(tmp_path, "moderation", encoder, texts, f"{target_name}-{label}")
        out = tmp_path / f"{target_name}-{label}.npz"
        run_script(by_name[target_name], PROBE, "pipeline", str(spec), str(out))
        results[f"{target_name}-{label}"] = dict(np.load(out))
    float32, native = results["native-float32"], results["native-cpu"]
    assert {t.name for t in targets} >= {"native", "avx2"}
    for target in targets:
        got = results[f"{target.name}-cpu"]
        outputs = sorted(name for name in float32 if name.isupper())
        assert set(outputs) == {"SENTIMENT", "INTENT", "TOXICITY", "HARMS"}
        for output in outputs:
            assert got[output].shape == (len(texts), float32[output].shape[1])
            assert float(np.abs(got[output] - float32[output]).max()) <= BOUND, target.name
            gap = float(np.abs(got[output] - native[output]).max())
            assert gap <= ACROSS_KERNELS, (target.name, output, gap)
