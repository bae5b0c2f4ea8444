"""Triton Python-backend model: the whole moderation pipeline, text in, three softmax rows out.

``modstream models build`` copies this file as ``model.py`` into ``moderation/1`` and
``moderation_v1/1``. It replaces the former Triton ensemble (tokenizer -> encoder -> three
heads), which crashed this tritonserver build (SIGSEGV in ``TRITONBACKEND_ResponseSend``) as
soon as it received concurrent requests; see ``model_repository/README.md``.

One ``execute`` call runs a whole dynamic batch in process, with the same steps and numbers as
the composing models: the ``tokenizers`` tokenizer with the e5 prefix, padded and truncated to
``max_length``; the encoder ONNX with onnxruntime; the three head ONNX files on the embedding.
The float32 encoder runs the batch in groups of ``chunk_rows`` (default 16) messages of similar
token count, each group without the columns that are padding in all its rows: padding is masked
out, so the embeddings are the same (to float rounding), and short chat lines do not pay for the
longest message of the batch (about 2x fewer encoder FLOPs on chat traffic).

The int8 CPU encoder quantises its activations with one scale per run, so in a group a
message's scores depend a little on the other messages of its batch (a toxicity score moved by
up to 0.22 between batch compositions, enough to flip a decision near a threshold).
``per_message = "true"`` runs each message on its own instead, spread over ``intra_op_threads``
worker threads of one encoder thread each: a message then gets the same scores whatever it is
batched with, at about 65-71 % of the grouped throughput on 2 cores (the CPU model's speed over
float32 falls from 2.1-2.5x to about 1.3x). The default stays grouped (``false``).

Input contract: ``TEXT`` is the message's *canonical* text, ``pipelines.canonical.canonicalize
(raw).text`` (NFKC, case folded, look-alike letters and Traditional characters mapped, split
letters re-joined), which the worker computes once for the rules and sends here; the heads are
trained and evaluated on that same text (``modelbuild/canonical_inputs.py``). This model does
not canonicalise (Triton's Python stub has no ``pipelines``); ``canonicalize`` is idempotent, so
a caller that canonicalises text that is already canonical sends the same text. A raw message
still gets scores, but scored off the training distribution (upper case, full-width letters,
Traditional characters), so less accurately.

Config parameters (paths are relative to this model's folder, so the files of the composing
models are read in place, never copied): ``tokenizer_file``, ``encoder_file``,
``sentiment_file``, ``intent_file``, ``toxicity_file``, ``max_length``, ``prefix`` and,
optionally, ``cpu_encoder_file``, ``intra_op_threads`` (default: the machine's CPU count, for
the encoder; the heads, a 384-wide matrix product each, use one thread), ``chunk_rows`` and
``per_message``.

Which encoder runs depends on where: with CUDA (a ``KIND_GPU`` instance and onnxruntime-gpu) the
float32 ``encoder_file``; on CPU the int8 ``cpu_encoder_file`` when the config names one (about
twice as fast, same heads; see ``model_repository/encoder/MODEL_CARD.md``), else
``encoder_file``. Removing ``cpu_encoder_file`` from the config runs float32 on CPU too.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

__all__ = [
    "ENCODER_UNFUSED",
    "LEXICON_SCORES",
    "OUTPUT_HEADS",
    "PipelineConfigError",
    "TritonPythonModel",
    "lexicon_scores",
]

OUTPUT_HEADS: dict[str, str] = {
    "SENTIMENT": "sentiment_file",
    "INTENT": "intent_file",
    "TOXICITY": "toxicity_file",
}
"""Output tensor -> the config parameter naming its head file."""

LEXICON_SCORES = ("compound", "pos", "neg", "neu")
"""VADER's scores, in the order ``features`` heads read them after the encoder features."""

ENCODER_UNFUSED = ("SkipLayerNormFusion",)
"""onnxruntime optimisers not applied to the encoder. Fusing ``Add`` + ``LayerNormalization``
into ``SkipLayerNormalization`` made the int8 encoder about 1.5x slower on chat batches (that CPU
kernel is slow on these shapes); the float32 graph does not match the pattern, so it is
unaffected."""

_PAD_ID = 1
_PAD_TOKEN = "<pad>"  # noqa: S105 - a vocabulary entry, not a secret
_EMBEDDING = "embedding"
_FEATURES = "features"
_PROBABILITIES = "probabilities"
_CHUNK_ROWS = 16

Array = np.ndarray[Any, Any]


class PipelineConfigError(ValueError):
    """The model config lacks a parameter, or names a file that does not exist."""


def lexicon_scores(analyzer: Any, texts: list[str]) -> Array:
    """``[n, 4]`` float32: VADER's compound, positive, negative and neutral scores per text
    (``analyzer`` is a ``vaderSentiment`` ``SentimentIntensityAnalyzer``)."""
    out = np.zeros((len(texts), len(LEXICON_SCORES)), dtype=np.float32)
    for row, text in enumerate(texts):
        scores = analyzer.polarity_scores(text)
        out[row] = [scores[key] for key in LEXICON_SCORES]
    return out


def _head_input(session: ort.InferenceSession) -> str:
    name = str(session.get_inputs()[0].name)
    if name not in (_EMBEDDING, _FEATURES):
        raise PipelineConfigError(f"head input must be {_EMBEDDING!r} or {_FEATURES!r}: {name!r}")
    return name


def _session(
    path: Path, threads: int, providers: list[Any], disabled: tuple[str, ...] = ()
) -> ort.InferenceSession:
    if not path.is_file():
        raise PipelineConfigError(f"model file not found: {path}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # No busy-waiting between runs: the CPU is shared with the other models and services.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        str(path), options, providers=providers, disabled_optimizers=list(disabled)
    )


def _providers(args: dict[str, str]) -> list[Any]:
    if (
        args.get("model_instance_kind") == "GPU"
        and "CUDAExecutionProvider" in ort.get_available_providers()
    ):
        device = int(args.get("model_instance_device_id", "0"))
        return [("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _encoder_key(params: dict[str, str], providers: list[Any]) -> str:
    """The config parameter naming the encoder to run: the int8 one on CPU when configured."""
    on_cpu = providers == ["CPUExecutionProvider"]
    return "cpu_encoder_file" if on_cpu and "cpu_encoder_file" in params else "encoder_file"


class TritonPythonModel:
    """Loads tokenizer, encoder and heads once per instance; ``execute`` runs a whole batch."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params: dict[str, str] = {
            k: str(v["string_value"]) for k, v in config.get("parameters", {}).items()
        }
        folder = Path(args["model_repository"])

        def file(key: str) -> Path:
            if key not in params:
                raise PipelineConfigError(f"config parameter {key!r} is missing")
            return (folder / params[key]).resolve()

        self._prefix = params.get("prefix", "query: ")
        length = int(params.get("max_length", "64"))
        tokenizer_path = file("tokenizer_file")
        if not tokenizer_path.is_file():
            raise PipelineConfigError(f"tokenizer file not found: {tokenizer_path}")
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=length)
        tokenizer.enable_padding(pad_id=_PAD_ID, pad_token=_PAD_TOKEN, length=length)
        self._tokenizer = tokenizer
        threads = int(params.get("intra_op_threads", "0")) or (os.cpu_count() or 1)
        providers = _providers(args)
        key = _encoder_key(params, providers)
        self.encoder_path = file(key)
        """The encoder file this instance runs (float32 or the int8 CPU one)."""
        per_message = params.get("per_message", "false").strip().lower()
        if per_message not in ("true", "false"):
            raise PipelineConfigError(f"per_message must be 'true' or 'false': {per_message!r}")
        self._pool: ThreadPoolExecutor | None = None
        if per_message == "true":
            self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="encoder")
        encoder_threads = 1 if self._pool is not None else max(1, threads)
        self._encoder = _session(self.encoder_path, encoder_threads, providers, ENCODER_UNFUSED)
        self._embedding_width = int(
            next(o.shape[1] for o in self._encoder.get_outputs() if o.name == _EMBEDDING)
        )
        self._chunk_rows = max(1, int(params.get("chunk_rows", str(_CHUNK_ROWS))))
        self._heads = {
            output: _session(file(key), 1, ["CPUExecutionProvider"])
            for output, key in OUTPUT_HEADS.items()
        }
        self._head_inputs = {name: _head_input(head) for name, head in self._heads.items()}
        self._analyzer: Any = None
        if _FEATURES in self._head_inputs.values():
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

            self._analyzer = SentimentIntensityAnalyzer()
        self._outputs = [o["name"] for o in config["output"]]
        self._widths = {o["name"]: int(o["dims"][-1]) for o in config["output"]}
        unknown = set(self._outputs) - set(self._heads)
        if unknown:
            raise PipelineConfigError(f"outputs without a head: {sorted(unknown)}")

    def scores(self, texts: list[str]) -> dict[str, Array]:
        """Probabilities per output for these texts, one row each (the whole pipeline)."""
        if not texts:
            return {n: np.zeros((0, self._widths[n]), np.float32) for n in self._outputs}
        encodings = self._tokenizer.encode_batch([self._prefix + t for t in texts])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        wanted = {self._head_inputs[name] for name in self._outputs}
        # The encoder's features end with the embedding, so one output serves both kinds of head.
        output = _FEATURES if _FEATURES in wanted else _EMBEDDING

        def encode(rows: Array) -> Array:
            chunk_mask = _trim(mask[rows])
            feed = {"input_ids": ids[rows, : chunk_mask.shape[1]], "attention_mask": chunk_mask}
            return np.asarray(self._encoder.run([output], feed)[0], dtype=np.float32)

        if self._pool is not None:
            groups = [np.array([row]) for row in range(len(texts))]
            parts = list(self._pool.map(encode, groups))
        else:
            groups = _length_chunks(mask, self._chunk_rows)
            parts = [encode(rows) for rows in groups]
        encoded = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for rows, part in zip(groups, parts, strict=True):
            encoded[rows] = part
        inputs = {_EMBEDDING: encoded[:, -self._embedding_width :]}
        if _FEATURES in wanted:
            inputs[_FEATURES] = np.hstack([encoded, lexicon_scores(self._analyzer, texts)])
        return {
            name: self._heads[name]
            .run([_PROBABILITIES], {self._head_inputs[name]: inputs[self._head_inputs[name]]})[0]
            .astype(np.float32)
            for name in self._outputs
        }

    def execute(self, requests: list[Any]) -> list[Any]:
        import triton_python_backend_utils as pb_utils  # only inside Triton's Python stub

        texts: list[str] = []
        sizes: list[int] = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            sizes.append(len(raw))
            texts.extend(_as_text(item) for item in raw)
        if texts:
            results = self.scores(texts)
        else:
            results = {n: np.zeros((0, self._widths[n]), np.float32) for n in self._outputs}
        responses = []
        start = 0
        for size in sizes:
            end = start + size
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(results[name][start:end]))
                for name in self._outputs
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start = end
        return responses

    def finalize(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        del self._encoder
        self._heads.clear()


def _length_chunks(mask: Array, rows: int) -> list[Array]:
    """Row indices grouped by token count (shortest first), at most ``rows`` per group, so one
    long message does not make every short one in the batch pay for its length."""
    order = np.argsort(mask.sum(axis=1), kind="stable")
    return [order[start : start + rows] for start in range(0, len(order), rows)]


def _trim(mask: Array) -> Array:
    """The mask without the trailing columns that are padding in every row (at least one)."""
    used = np.flatnonzero(mask.any(axis=0))
    return mask[:, : int(used[-1]) + 1 if used.size else 1]


def _as_text(item: object) -> str:
    if isinstance(item, bytes):
        return item.decode("utf-8", errors="replace")
    return str(item)
