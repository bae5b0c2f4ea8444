"""``python -m bench.cpu_model``: the CPU encoder against float32, in the served model, in process.

Both sides are the served model's own code (``pipeline_model.py``'s ``scores``: tokenizer,
encoder in length chunks, lexicon scores, heads) on the files ``moderation/config.pbtxt`` names,
each with its encoder fixed (no load-time choice): float32 ``model.onnx`` and the split-int8
``model_cpu.onnx``. What it prints, all from one run:

- ``kernel``: the integer kernel family onnxruntime takes on this CPU;
- speed: the sample chat lines (``pipelines/samples/chat.jsonl``) cycled into batches of 100,
  each batch run by one model then the other, so load from other jobs falls on both alike;
  wall-clock messages per second and CPU seconds per message of each; ``cpu_model_speedup`` is
  the wall-clock ratio, ``cpu_time_speedup`` the CPU-time ratio (what the load-time check uses);
- deviation: over the probe file, the sample chat and the dev set
  (``modelbuild/data/adversarial_dev.jsonl``), canonicalised as the worker sends them: per output
  the largest and 99th-percentile absolute probability difference and the top-class changes,
  and how many of the worker's whole decisions (rules, model, default thresholds) change;
- ``batch_dependence``: the largest difference between a message scored alone and in its batch;
- with ``--isa``: the same deviation on every instruction-set path this machine can show
  (native, an emulated AVX2-only CPU, AVX-512 VNNI with AMX refused; ``bench.instruction_sets``)
  over every ``--isa-step``-th probe (emulation is about 200x slower).

Last line: ``fp32_msgs_per_s=… cpu_msgs_per_s=… cpu_model_speedup=… cpu_time_speedup=…
max_deviation=… batch_dependence=…``. ``--eval`` instead runs ``modstream models eval`` with
each moderation model on the CPU encoder file its config names and prints its report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.models import cycled_batch, sample_messages

__all__ = [
    "agreement",
    "cpu_model_speedup",
    "deviation_texts",
    "main",
    "served_scores",
]

_ROOT = Path(__file__).resolve().parent.parent
_REPOSITORY = _ROOT / "model_repository"
_CPU_FILE = _REPOSITORY / "encoder" / "1" / "model_cpu.onnx"
_DEV_SET = _ROOT / "modelbuild" / "data" / "adversarial_dev.jsonl"
_OUTPUTS = ("SENTIMENT", "INTENT", "TOXICITY", "HARMS")

Scores = Callable[[list[str]], dict[str, Any]]


def served_scores(repository: Path, model: str, threads: int, *, cpu_encoder: bool) -> Scores:
    """The served Python model's ``scores`` with a fixed encoder: the config's
    ``cpu_encoder_file`` (whatever its load-time check would find), or float32."""
    from modelbuild.serving.pipeline_model import TritonPythonModel
    from modelbuild.whole_decision import served_config

    args = served_config(repository, model)
    config = json.loads(args["model_config"])
    params = config["parameters"]
    if "cpu_encoder_file" not in params:
        raise SystemExit(f"{model}/config.pbtxt names no cpu_encoder_file")
    cpu_file = params.pop("cpu_encoder_file")  # no load-time choice: the encoder is fixed
    if cpu_encoder:
        params["encoder_file"] = cpu_file
    params["intra_op_threads"] = {"string_value": str(threads)}
    served = TritonPythonModel()
    served.initialize({**args, "model_config": json.dumps(config)})
    return served.scores


def deviation_texts() -> list[str]:
    """Probe file, sample chat and dev-set lines, canonical as the worker sends them."""
    from modelbuild.serving.pipeline_model import read_probes
    from pipelines.canonical import canonicalize

    raw = sample_messages() + [
        json.loads(line)["text"]
        for line in _DEV_SET.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    probes = read_probes(_REPOSITORY / "encoder" / "probes.jsonl")
    return probes + [canonicalize(text).text for text in raw]


def agreement(first: dict[str, Any], second: dict[str, Any]) -> dict[str, tuple[float, float, int]]:
    """Per output: the largest and 99th-percentile probability gap, and top-class changes."""
    out = {}
    for name, a in first.items():
        gap = np.abs(np.asarray(a) - np.asarray(second[name])).max(axis=1)
        changes = int((np.argmax(a, axis=1) != np.argmax(second[name], axis=1)).sum())
        out[name] = (float(gap.max()), float(np.quantile(gap, 0.99)), changes)
    return out


def _timed(fp32: Scores, cpu: Scores, batches: list[list[str]]) -> dict[str, float]:
    """Wall and CPU seconds of each side, batch by batch alternately, after one warm-up each."""
    fp32(batches[0])
    cpu(batches[0])
    spent = {"fp32_wall": 0.0, "fp32_cpu": 0.0, "cpu_wall": 0.0, "cpu_cpu": 0.0}
    for batch in batches:
        for name, fn in (("fp32", fp32), ("cpu", cpu)):
            wall, cpu_started = time.perf_counter(), time.process_time()
            fn(batch)
            spent[name + "_cpu"] += time.process_time() - cpu_started
            spent[name + "_wall"] += time.perf_counter() - wall
    return spent


def _batch_dependence(cpu: Scores, texts: list[str]) -> float:
    together = cpu(texts)
    return max(
        float(np.abs(cpu([text])[name][0] - together[name][row]).max())
        for row, text in enumerate(texts)
        for name in together
    )


def cpu_model_speedup(batches: int = 5) -> float:
    """The CPU encoder's wall-clock speed over float32's in the served model (``bench.pipeline``
    reports it); ``nan`` when the CPU encoder is not built."""
    if not _CPU_FILE.is_file():
        return float("nan")
    messages = sample_messages()
    timed = [cycled_batch(messages, 100, 100 * i) for i in range(batches)]
    fp32 = served_scores(_REPOSITORY, "moderation", 2, cpu_encoder=False)
    cpu = served_scores(_REPOSITORY, "moderation", 2, cpu_encoder=True)
    spent = _timed(fp32, cpu, timed)
    return spent["fp32_wall"] / spent["cpu_wall"]


def _isa(step: int) -> None:
    """Deviation of the CPU encoder on each instruction-set path, probes only."""
    from bench.instruction_sets.targets import available_targets, run_script
    from modelbuild.serving.pipeline_model import read_probes
    from modelbuild.whole_decision import served_config

    texts = read_probes(_REPOSITORY / "encoder" / "probes.jsonl")[::step]
    probe = Path(__file__).resolve().parent / "instruction_sets" / "probe.py"
    with tempfile.TemporaryDirectory(prefix="modstream-isa-") as tmp:
        folder = Path(tmp)
        targets = available_targets(folder / "noamx")
        runs: dict[str, dict[str, Any]] = {}
        args = served_config(_REPOSITORY, "moderation")
        params = json.loads(args["model_config"])["parameters"]
        files = {
            "float32": params["encoder_file"]["string_value"],
            "cpu": params["cpu_encoder_file"]["string_value"],
        }
        for target, encoder in [(targets[0], "float32"), *((t, "cpu") for t in targets)]:
            config = json.loads(args["model_config"])
            config["parameters"]["encoder_file"] = {"string_value": files[encoder]}
            config["parameters"].pop("cpu_encoder_file")
            spec = folder / f"{target.name}-{encoder}.json"
            spec.write_text(
                json.dumps({"args": {**args, "model_config": json.dumps(config)}, "texts": texts})
            )
            out = folder / f"{target.name}-{encoder}.npz"
            started = time.perf_counter()
            run_script(target, probe, "pipeline", str(spec), str(out), timeout_s=7200)
            took = time.perf_counter() - started
            print(f"isa_run target={target.name} encoder={encoder} s={took:.0f}", flush=True)
            runs[f"{target.name}-{encoder}"] = {
                k: v for k, v in np.load(out).items() if k in _OUTPUTS
            }
    fp32, native = runs["native-float32"], runs["native-cpu"]
    for target in targets:
        got = runs[f"{target.name}-cpu"]
        to_fp32 = max(float(np.abs(got[n] - fp32[n]).max()) for n in _OUTPUTS)
        to_native = max(float(np.abs(got[n] - native[n]).max()) for n in _OUTPUTS)
        kernel = target.kernel.replace(" ", "_")
        print(
            f"isa target={target.name} kernel={kernel} probes={len(texts)} "
            f"max_deviation_to_fp32={to_fp32:.5f} max_gap_to_native_cpu={to_native:.2e}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_model", description=__doc__)
    parser.add_argument("--model", default="moderation")
    parser.add_argument("--batches", type=int, default=10, help="timed batches of 100")
    parser.add_argument("--threads", type=int, default=2, help="encoder intra-op threads")
    parser.add_argument("--isa", action="store_true", help="also run every instruction-set path")
    parser.add_argument("--isa-step", type=int, default=4, help="every n-th probe for --isa")
    parser.add_argument("--eval", action="store_true", help="grade the CPU encoder instead")
    args = parser.parse_args(argv)
    if not _CPU_FILE.is_file():
        print("run `modstream models build` first", file=sys.stderr)
        return 2
    if args.eval:
        from modelbuild.build import BuildPaths
        from modelbuild.evaluate import evaluate, format_report
        from modelbuild.settings import ModelToolSettings

        work = ModelToolSettings().models.work_dir
        paths = BuildPaths(_REPOSITORY, work / "cache", work / "build")
        print(format_report(evaluate(paths, cpu_encoder=True)))
        return 0
    from bench.instruction_sets.targets import native_kernel
    from modelbuild.whole_decision import decide_texts, served_scorer

    print(f"kernel={native_kernel().replace(' ', '_')}")
    fp32 = served_scores(_REPOSITORY, args.model, args.threads, cpu_encoder=False)
    cpu = served_scores(_REPOSITORY, args.model, args.threads, cpu_encoder=True)
    messages = sample_messages()
    batches = [cycled_batch(messages, 100, 100 * i) for i in range(args.batches)]
    spent = _timed(fp32, cpu, batches)
    count = 100 * len(batches)
    texts = deviation_texts()
    gaps = agreement(cpu(texts), fp32(texts))
    for name, (largest, p99, changes) in gaps.items():
        print(
            f"{name:10s} lines={len(texts)} max_gap={largest:.4f} p99_gap={p99:.4f} "
            f"top_class_changes={changes}"
        )
    decided = [
        decide_texts(texts, served_scorer(_REPOSITORY, args.model, args.threads, cpu_encoder=c))
        for c in (False, True)
    ]
    changed = sum(
        1
        for a, b in zip(*decided, strict=True)
        if a is not None and b is not None and (a.decision, a.escalate) != (b.decision, b.escalate)
    )
    print(f"whole_decision lines={len(texts)} changed={changed}")
    dependence = _batch_dependence(cpu, texts[:40])
    fp32_rate, cpu_rate = count / spent["fp32_wall"], count / spent["cpu_wall"]
    for name in ("fp32", "cpu"):
        print(
            f"{name:10s} batch=100 msgs_per_s={count / spent[name + '_wall']:.1f} "
            f"cpu_ms_per_msg={1000 * spent[name + '_cpu'] / count:.2f}"
        )
    if args.isa:
        _isa(args.isa_step)
    print(
        f"fp32_msgs_per_s={fp32_rate:.1f} cpu_msgs_per_s={cpu_rate:.1f} "
        f"cpu_model_speedup={spent['fp32_wall'] / spent['cpu_wall']:.2f} "
        f"cpu_time_speedup={spent['fp32_cpu'] / spent['cpu_cpu']:.2f} "
        f"max_deviation={max(g[0] for g in gaps.values()):.4f} batch_dependence={dependence:.1e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
