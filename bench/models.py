"""``python -m bench.models``: the moderation models, direct onnxruntime versus Triton over gRPC.

Messages are the sample chat lines of ``pipelines/samples/chat.jsonl`` (English and Chinese,
realistic lengths), cycled to fill each batch. Measured in one run, on the same model files:

- ``ort``: in process, the serving path without Triton: tokenizer (64 tokens, padding trimmed
  per batch), encoder and the three heads, batch 100: the ceiling;
- ``triton bN``: the ``moderation`` ensemble through gRPC, one request of N messages at a time.

Without ``--url`` a private server is started on ports 28200-28202 over ``model_repository/``.
Last line: ``ort_msgs_per_s=… triton_b100_msgs_per_s=… triton_overhead=…``
(overhead = 1 - triton / ort at batch 100).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["main"]

_ROOT = Path(__file__).resolve().parent.parent
_REPOSITORY = _ROOT / "model_repository"
_SAMPLES = _ROOT / "pipelines" / "samples" / "chat.jsonl"
_HEADS = (("sentiment", "1"), ("intent", "1"), ("toxicity", "2"))


def _messages() -> list[str]:
    lines = _SAMPLES.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


def _batch(messages: list[str], size: int, offset: int) -> list[str]:
    return [messages[(offset + i) % len(messages)] for i in range(size)]


def _rate(fn: Callable[[list[str]], object], batches: list[list[str]]) -> float:
    fn(batches[0])  # warm-up
    start = time.perf_counter()
    count = 0
    for batch in batches:
        fn(batch)
        count += len(batch)
    return count / (time.perf_counter() - start)


def _direct(repository: Path, threads: int) -> Callable[[list[str]], object]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(repository / "tokenizer" / "1" / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=64)
    tokenizer.enable_padding(pad_id=1, pad_token="<pad>", length=64)  # noqa: S106
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    encoder = ort.InferenceSession(
        str(repository / "encoder" / "1" / "model.onnx"),
        options,
        providers=["CPUExecutionProvider"],
    )
    head_options = ort.SessionOptions()
    head_options.intra_op_num_threads = 1
    heads = [
        ort.InferenceSession(
            str(repository / name / version / "model.onnx"),
            head_options,
            providers=["CPUExecutionProvider"],
        )
        for name, version in _HEADS
    ]

    def run(texts: list[str]) -> list[npt.NDArray[np.float32]]:
        encodings = tokenizer.encode_batch(["query: " + t for t in texts])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        used = int(np.flatnonzero(mask.any(axis=0))[-1]) + 1
        (emb,) = encoder.run(
            ["embedding"], {"input_ids": ids[:, :used], "attention_mask": mask[:, :used]}
        )
        return [h.run(["probabilities"], {"embedding": emb})[0] for h in heads]

    return run


def _triton(url: str, model: str) -> Callable[[list[str]], object]:
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
    if not (_REPOSITORY / "encoder" / "1" / "model.onnx").is_file():
        print("run `modstream models build` first", file=sys.stderr)
        return 2
    messages = _messages()
    with ExitStack() as stack:
        url = args.url
        if url is None:
            from modelbuild.local_triton import local_triton

            state = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            url = stack.enter_context(local_triton(_REPOSITORY, state, base_port=28200)).grpc_url
        b100 = [_batch(messages, 100, 100 * i) for i in range(args.batches)]
        ort_rate = _rate(_direct(_REPOSITORY, args.threads), b100)
        print(f"ort        batch=100 msgs_per_s={ort_rate:.1f}")
        triton = _triton(url, args.model)
        rates: dict[int, float] = {}
        for size, count in ((1, 100), (32, max(4, args.batches * 3)), (100, args.batches)):
            batches = [_batch(messages, size, size * i) for i in range(count)]
            rates[size] = _rate(triton, batches)
            print(f"triton     batch={size:<3d} msgs_per_s={rates[size]:.1f}")
    overhead = 1.0 - rates[100] / ort_rate
    print(
        f"ort_msgs_per_s={ort_rate:.1f} triton_b100_msgs_per_s={rates[100]:.1f} "
        f"triton_overhead={overhead:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
