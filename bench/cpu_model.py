"""``python -m bench.cpu_model``: the CPU moderation model against the float32 one, in process.

Both sides are the served model's own code (``pipeline_model.py``'s ``scores``: tokenizer,
encoder in length chunks, lexicon scores, heads) on the files ``moderation/config.pbtxt`` names;
they differ only in the encoder: the config as served on CPU (``cpu_encoder_file``, int8) against
the same config without it (``encoder_file``, float32: the model before the CPU variant).
Messages are the sample chat lines of ``pipelines/samples/chat.jsonl``, cycled into batches of
100; each batch is run by one model then the other, so load from other jobs on a shared machine
falls on both alike and the ratio stays meaningful where absolute rates do not.

Also printed: how often the two agree on each output's top class, and their largest probability
difference, over the timed batches. Last line: ``cpu_model_speedup=X.XX`` (float32 time / CPU
time).

``--eval`` instead grades the CPU encoder with ``modstream models eval``'s own code
(:func:`modelbuild.evaluate.evaluate` on build paths whose ``encoder`` is ``model_cpu.onnx``,
the heads unchanged; embeddings cached under ``<models.work_dir>/build-cpu``), printing its
report; the last line is the same headline as ``modstream models eval``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.models import _interleaved, _model_args, cycled_batch, sample_messages

if TYPE_CHECKING:
    from modelbuild.build import BuildPaths

__all__ = ["agreement", "cpu_eval_paths", "main", "served_scores"]

_ROOT = Path(__file__).resolve().parent.parent
_REPOSITORY = _ROOT / "model_repository"
_CPU_KEY = "cpu_encoder_file"

Scores = Callable[[list[str]], dict[str, Any]]


def served_scores(repository: Path, model: str, threads: int, *, cpu_encoder: bool) -> Scores:
    """The served Python model's ``scores``, initialised as Triton would on a CPU instance;
    ``cpu_encoder=False`` drops ``cpu_encoder_file`` from its config (the float32 encoder)."""
    from modelbuild.serving.pipeline_model import TritonPythonModel

    args = _model_args(repository, model)
    config = json.loads(args["model_config"])
    params = config["parameters"]
    if _CPU_KEY not in params:
        raise SystemExit(f"{model}/config.pbtxt names no {_CPU_KEY}")
    if not cpu_encoder:
        del params[_CPU_KEY]
    params["intra_op_threads"] = {"string_value": str(threads)}
    served = TritonPythonModel()
    served.initialize({**args, "model_config": json.dumps(config)})
    return served.scores


def cpu_eval_paths(repository: Path, work: Path) -> BuildPaths:
    """Build paths for ``evaluate``: the heads, tokenizer and cache as usual, but ``encoder`` is
    the int8 CPU file (what CPU instances serve); embeddings are cached under ``work/build-cpu``
    so the float32 cache in ``work/build`` stays valid."""
    from modelbuild.build import BuildPaths

    class CpuEncoderPaths(BuildPaths):
        @property
        def encoder(self) -> Path:
            return self.repository / "encoder" / "1" / "model_cpu.onnx"

    return CpuEncoderPaths(repository, work / "cache", work / "build-cpu")


def _cpu_eval() -> int:
    from modelbuild.evaluate import evaluate, format_report
    from modelbuild.settings import ModelToolSettings

    paths = cpu_eval_paths(_REPOSITORY, ModelToolSettings().models.work_dir)
    print(format_report(evaluate(paths)))
    return 0


def agreement(first: dict[str, Any], second: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Per output: the share of rows with the same top class, and the largest probability gap."""
    out = {}
    for name, a in first.items():
        b = second[name]
        same = float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))
        out[name] = (same, float(np.abs(a - b).max()))
    return out


def measure(
    model: str = "moderation", batches: int = 10, threads: int = 2
) -> tuple[float, float, Scores, Scores, list[list[str]]]:
    """fp32 and CPU (int8 encoder) rates of the served code, interleaved on the same batches."""
    messages = sample_messages()
    timed = [cycled_batch(messages, 100, 100 * i) for i in range(batches)]
    fp32 = served_scores(_REPOSITORY, model, threads, cpu_encoder=False)
    cpu = served_scores(_REPOSITORY, model, threads, cpu_encoder=True)
    fp32_rate, cpu_rate = _interleaved(fp32, cpu, timed)
    return fp32_rate, cpu_rate, fp32, cpu, timed


def cpu_model_speedup(batches: int = 5) -> float:
    """The served CPU model's speed over the fp32 model's (``bench.pipeline`` reports it);
    ``nan`` when the CPU encoder is not built."""
    if not (_REPOSITORY / "encoder" / "1" / "model_cpu.onnx").is_file():
        return float("nan")
    fp32_rate, cpu_rate, *_ = measure(batches=batches)
    return cpu_rate / fp32_rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_model", description=__doc__)
    parser.add_argument("--model", default="moderation")
    parser.add_argument("--batches", type=int, default=10, help="timed batches of 100")
    parser.add_argument("--threads", type=int, default=2, help="encoder intra-op threads")
    parser.add_argument(
        "--eval", action="store_true", help="grade the CPU encoder on the held-out splits instead"
    )
    args = parser.parse_args(argv)
    cpu_file = _REPOSITORY / "encoder" / "1" / "model_cpu.onnx"
    if not cpu_file.is_file():
        print("run `modstream models build` first", file=sys.stderr)
        return 2
    if args.eval:
        return _cpu_eval()
    fp32_rate, cpu_rate, fp32, cpu, batches = measure(args.model, args.batches, args.threads)
    texts = [text for batch in batches for text in batch]
    for name, (same, gap) in agreement(fp32(texts), cpu(texts)).items():
        print(f"{name:10s} same_top_class={same:.3f} max_probability_gap={gap:.3f}")
    print(f"fp32       batch=100 msgs_per_s={fp32_rate:.1f}")
    print(f"cpu        batch=100 msgs_per_s={cpu_rate:.1f}")
    print(
        f"fp32_msgs_per_s={fp32_rate:.1f} cpu_msgs_per_s={cpu_rate:.1f} "
        f"cpu_model_speedup={cpu_rate / fp32_rate:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
