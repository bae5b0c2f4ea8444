"""``python -m bench.models``: the moderation models, direct onnxruntime versus Triton over gRPC.

Messages are the sample chat lines of ``pipelines/samples/chat.jsonl`` (English and Chinese,
realistic lengths), cycled to fill each batch. Measured in one run, on the same model files:

- ``ort``: in process, the served model's own code without Triton (``pipeline_model.py``'s
  ``scores``: tokenizer, encoder with onnxruntime in length chunks, lexicon scores, heads), on
  the files its ``config.pbtxt`` names, batch 100: the ceiling;
- ``triton bN``: the ``moderation`` model through gRPC, one request of N messages at a time.

At batch 100 the two alternate batch by batch, so load from other jobs on the machine falls on
both alike and the overhead ratio stays meaningful on a shared machine.

Without ``--url`` a private server is started on ports 28200-28202 over ``model_repository/``.
Last line: ``ort_msgs_per_s=… triton_b100_msgs_per_s=… triton_overhead=…``
(overhead = 1 - triton / ort at batch 100).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import numpy as np

__all__ = [
    "REPOSITORY",
    "cycled_batch",
    "main",
    "messages_per_s",
    "private_server",
    "sample_messages",
    "triton_infer",
]

_ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = _ROOT / "model_repository"
PRIVATE_PORTS = (28200, 28201, 28202)
"""HTTP, gRPC and metrics ports of the private server."""
_SAMPLES = _ROOT / "pipelines" / "samples" / "chat.jsonl"


def sample_messages() -> list[str]:
    """The sample chat lines (``pipelines/samples/chat.jsonl``), in file order."""
    lines = _SAMPLES.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


def cycled_batch(messages: list[str], size: int, offset: int) -> list[str]:
    """``size`` messages from ``offset`` on, cycling through ``messages``."""
    return [messages[(offset + i) % len(messages)] for i in range(size)]


def messages_per_s(fn: Callable[[list[str]], object], batches: list[list[str]]) -> float:
    """Messages per second of ``fn`` over ``batches``, one call at a time (after one warm-up)."""
    fn(batches[0])  # warm-up
    start = time.perf_counter()
    count = 0
    for batch in batches:
        fn(batch)
        count += len(batch)
    return count / (time.perf_counter() - start)


def _model_args(repository: Path, model: str) -> dict[str, str]:
    """The ``initialize`` arguments Triton would give ``model`` (its config.pbtxt's outputs and
    parameters, as JSON), for running the same Python model in process."""
    text = (repository / model / "config.pbtxt").read_text(encoding="utf-8")
    params = dict(re.findall(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}', text))
    outputs = re.findall(r'\{ name: "([A-Z]+)" data_type: TYPE_FP32 dims: \[ (\d+) \]', text)
    config = {
        "output": [{"name": name, "dims": [int(width)]} for name, width in outputs],
        "parameters": {k: {"string_value": v} for k, v in params.items()},
    }
    return {"model_config": json.dumps(config), "model_repository": str(repository / model)}


def _interleaved(
    first: Callable[[list[str]], object],
    second: Callable[[list[str]], object],
    batches: list[list[str]],
) -> tuple[float, float]:
    """Messages per second of ``first`` and ``second``, each batch run by one then the other, so
    that a noisy neighbour slows both alike (the machine is shared)."""
    first(batches[0])  # warm-up
    second(batches[0])
    spent = [0.0, 0.0]
    for batch in batches:
        for i, fn in enumerate((first, second)):
            start = time.perf_counter()
            fn(batch)
            spent[i] += time.perf_counter() - start
    count = sum(len(b) for b in batches)
    return count / spent[0], count / spent[1]


def _direct(repository: Path, model: str, threads: int) -> Callable[[list[str]], object]:
    """The served Python model's own code (tokenizer, encoder in length chunks, lexicon scores,
    heads), called in process: everything Triton does except Triton."""
    from modelbuild.serving.pipeline_model import TritonPythonModel

    served = TritonPythonModel()
    args = _model_args(repository, model)
    config = json.loads(args["model_config"])
    config["parameters"]["intra_op_threads"] = {"string_value": str(threads)}
    served.initialize({**args, "model_config": json.dumps(config)})
    return served.scores


def private_server(stack: ExitStack, repository: Path) -> str:
    """Start a ``tritonserver`` of our own over ``repository`` (ports 28200-28202, state in a
    temporary directory), stopped when ``stack`` closes; its gRPC address."""
    from stack import private_triton

    state = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    return stack.enter_context(private_triton(repository, state, PRIVATE_PORTS)).endpoint


def triton_infer(url: str, model: str) -> Callable[[list[str]], object]:
    """One blocking gRPC ``infer`` of ``model`` at ``url`` per call, over a batch of texts."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)

    def run(texts: list[str]) -> object:
        data = np.array([[t.encode("utf-8")] for t in texts], dtype=object)
        tensor = grpcclient.InferInput("TEXT", list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        return client.infer(model, [tensor])

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.models", description=__doc__)
    parser.add_argument("--url", default=None, help="gRPC address of a running Triton")
    parser.add_argument("--model", default="moderation")
    parser.add_argument("--batches", type=int, default=20, help="timed batches of 100")
    parser.add_argument("--threads", type=int, default=2, help="encoder intra-op threads (ort)")
    args = parser.parse_args(argv)
    if not (REPOSITORY / "encoder" / "1" / "model.onnx").is_file():
        print("run `modstream models build` first", file=sys.stderr)
        return 2
    messages = sample_messages()
    with ExitStack() as stack:
        url = args.url or private_server(stack, REPOSITORY)
        b100 = [cycled_batch(messages, 100, 100 * i) for i in range(args.batches)]
        direct = _direct(REPOSITORY, args.model, args.threads)
        triton = triton_infer(url, args.model)
        rates: dict[int, float] = {}
        for size, count in ((1, 100), (32, max(4, args.batches * 3))):
            batches = [cycled_batch(messages, size, size * i) for i in range(count)]
            rates[size] = messages_per_s(triton, batches)
            print(f"triton     batch={size:<3d} msgs_per_s={rates[size]:.1f}")
        ort_rate, rates[100] = _interleaved(direct, triton, b100)
        print(f"ort        batch=100 msgs_per_s={ort_rate:.1f}")
        print(f"triton     batch=100 msgs_per_s={rates[100]:.1f}")
    overhead = 1.0 - rates[100] / ort_rate
    print(
        f"ort_msgs_per_s={ort_rate:.1f} triton_b100_msgs_per_s={rates[100]:.1f} "
        f"triton_overhead={overhead:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
