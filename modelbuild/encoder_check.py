"""The build's check of the CPU encoder: head probabilities and whole decisions against float32.

Run by ``modstream models build`` once the encoders and heads are in place, on this machine.
For every moderation model (each reads its own heads) the served code
(``modelbuild/serving/pipeline_model.py``) is initialised as Triton would on a CPU instance, with
the speed condition off (``cpu_encoder_min_speedup = 0``): its load-time check then decides on
accuracy alone, over the probe messages of its ``probe_file``. The same probes also go through
the worker's whole decision (rules, model, policy at the default thresholds) with either encoder,
and the changed decisions are counted.

A CPU encoder any model refuses is set aside (``model_cpu.rejected.onnx``), so Triton serves
float32 on CPU too, and the build says why; it does not fail, as a model refusing it at load
would not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from modelbuild.whole_decision import decide_texts, served_config, served_scorer

__all__ = ["CpuEncoderCheck", "check_cpu_encoder", "probe_texts"]


@dataclass(frozen=True, slots=True)
class CpuEncoderCheck:
    """One moderation model's verdict on the CPU encoder."""

    model: str
    accepted: bool
    reason: str
    max_deviation: float | None
    deviation_output: str | None
    top_class_changes: int | None
    speedup: float | None
    """Measured at the check, not required by it."""
    decision_changes: int
    probes: int


def probe_texts(repository: Path, model: str = "moderation") -> list[str]:
    """The probe messages ``model``'s config names (its ``probe_file``)."""
    from modelbuild.serving.pipeline_model import read_probes

    params = json.loads(served_config(repository, model)["model_config"])["parameters"]
    return read_probes((repository / model / params["probe_file"]["string_value"]).resolve())


def _accuracy_only(repository: Path, model: str, threads: int) -> object:
    from modelbuild.serving.pipeline_model import TritonPythonModel

    args = served_config(repository, model)
    config = json.loads(args["model_config"])
    config["parameters"]["intra_op_threads"] = {"string_value": str(threads)}
    config["parameters"]["cpu_encoder_min_speedup"] = {"string_value": "0"}
    served = TritonPythonModel()
    served.initialize({**args, "model_config": json.dumps(config)})
    return served.choice


def check_cpu_encoder(
    repository: Path, models: tuple[str, ...], threads: int = 2
) -> list[CpuEncoderCheck]:
    """Each model's verdict on the CPU encoder its config names (see the module docstring)."""
    from modelbuild.serving.pipeline_model import CPU, EncoderChoice

    checks = []
    for model in models:
        probes = probe_texts(repository, model)
        choice = _accuracy_only(repository, model, threads)
        assert isinstance(choice, EncoderChoice)
        float32 = decide_texts(probes, served_scorer(repository, model, threads))
        cpu = decide_texts(probes, served_scorer(repository, model, threads, cpu_encoder=True))
        changes = sum(
            1
            for a, b in zip(float32, cpu, strict=True)
            if a is not None
            and b is not None
            and (a.decision, a.escalate) != (b.decision, b.escalate)
        )
        checks.append(
            CpuEncoderCheck(
                model=model,
                accepted=choice.encoder == CPU,
                reason=choice.reason,
                max_deviation=choice.max_deviation,
                deviation_output=choice.deviation_output,
                top_class_changes=choice.top_class_changes,
                speedup=choice.speedup,
                decision_changes=changes,
                probes=len(probes),
            )
        )
    return checks
