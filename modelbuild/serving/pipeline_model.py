"""Triton Python-backend model: the whole moderation pipeline, text in, three softmax rows out
(and, where the config lists it, ``HARMS``: five independent probabilities).

``modstream models build`` copies this file as ``model.py`` into ``moderation/1`` and
``moderation_v1/1``. It replaces the former Triton ensemble (tokenizer -> encoder -> three
heads), which crashed this tritonserver build (SIGSEGV in ``TRITONBACKEND_ResponseSend``) as
soon as it received concurrent requests; see ``model_repository/README.md``.

One ``execute`` call runs a whole dynamic batch in process, with the same steps and numbers as
the composing models: the ``tokenizers`` tokenizer with the e5 prefix, padded and truncated to
``max_length``; the encoder ONNX with onnxruntime; the three head ONNX files on the embedding.
The encoder runs the batch in groups of ``chunk_rows`` (default 16) messages of similar token
count, each group without the columns that are padding in all its rows: padding is masked out,
so the result is the same, and short chat lines do not pay for the longest message of the batch
(about 2x fewer encoder FLOPs on chat traffic). Neither encoder's numbers depend on how messages
are grouped: the CPU encoder's scales are fixed or per token (``modelbuild/cpu_encoder.py``).

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
``sentiment_file``, ``intent_file``, ``toxicity_file`` (``harms_file`` with a ``HARMS``
output), ``max_length``, ``prefix`` and,
optionally, ``intra_op_threads`` (default: the machine's CPU count, for the encoder; the heads, a
384-wide matrix product each, use one thread), ``chunk_rows``, and the CPU encoder's:
``cpu_encoder_file``, ``probe_file`` (required with it), ``cpu_encoder_max_deviation`` (default
0.02) and ``cpu_encoder_min_speedup`` (default 1.05).

Which encoder runs, and the check at load. With CUDA (a ``KIND_GPU`` instance and
onnxruntime-gpu) the float32 ``encoder_file``. On CPU, when the config names a
``cpu_encoder_file`` that exists, the model first runs the probe messages of ``probe_file``
(canonical texts, one JSON object per line) through the whole pipeline with each encoder and
serves the CPU one only if every head probability of every probe is within
``cpu_encoder_max_deviation`` of float32's on this machine, and if it spent at least
``cpu_encoder_min_speedup`` times less CPU time (so a CPU whose int8 kernels are not faster
keeps float32). Otherwise it serves float32 and says why. Either way it logs one
``encoder_chosen`` line (encoder, reason, largest deviation and the output it was on, top-class
changes, speed-up; never message text) and, inside Triton, sets the gauge
``modstream_model_encoder{model, encoder}`` to 1 for the encoder it serves (0 for the other),
with ``modstream_model_encoder_deviation{model}`` and ``modstream_model_encoder_speedup{model}``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

__all__ = [
    "CPU",
    "ENCODER_UNFUSED",
    "FLOAT32",
    "LEXICON_SCORES",
    "OUTPUT_HEADS",
    "EncoderChoice",
    "PipelineConfigError",
    "TritonPythonModel",
    "choose_encoder",
    "lexicon_scores",
    "read_probes",
]

OUTPUT_HEADS: dict[str, str] = {
    "SENTIMENT": "sentiment_file",
    "INTENT": "intent_file",
    "TOXICITY": "toxicity_file",
    "HARMS": "harms_file",
}
"""Output tensor -> the config parameter naming its head file. A model serves the outputs its
config lists (``HARMS``, five independent probabilities, only where the config has it)."""

LEXICON_SCORES = ("compound", "pos", "neg", "neu")
"""VADER's scores, in the order ``features`` heads read them after the encoder features."""

ENCODER_UNFUSED = ("SkipLayerNormFusion",)
"""onnxruntime optimisers not applied to the encoder: its ``SkipLayerNormalization`` kernel (the
fusion of ``Add`` + ``LayerNormalization``) was slower than the two operators on short chat
batches in the CPU encoder; the float32 graph does not match the pattern, so it is unaffected."""

CPU = "cpu"
FLOAT32 = "float32"
"""The two encoders a moderation model can serve (the label of its ``modstream_model_encoder``
gauge)."""

_PAD_ID = 1
_PAD_TOKEN = "<pad>"  # noqa: S105 - a vocabulary entry, not a secret
_EMBEDDING = "embedding"
_FEATURES = "features"
_PROBABILITIES = "probabilities"
_CHUNK_ROWS = 16
_MAX_DEVIATION = 0.02
_MIN_SPEEDUP = 1.05

Array = np.ndarray[Any, Any]
Scores = Callable[[list[str]], dict[str, Array]]
_log = logging.getLogger(__name__)


class PipelineConfigError(ValueError):
    """The model config lacks a parameter, or names a file that does not exist."""


@dataclass(frozen=True, slots=True)
class EncoderChoice:
    """Which encoder a moderation model serves, and why (see the module docstring)."""

    encoder: str
    reason: str
    max_deviation: float | None = None
    """The largest absolute difference of any head probability between the CPU encoder and
    float32 over the probe messages."""
    deviation_output: str | None = None
    top_class_changes: int | None = None
    """Probe rows (over every output) whose most probable class differs."""
    speedup: float | None = None
    """float32's CPU time over the CPU encoder's, on the probe messages."""
    probes: int = 0

    def as_fields(self) -> dict[str, object]:
        return asdict(self)


def read_probes(path: Path) -> list[str]:
    """The probe messages of a ``probe_file``: the ``text`` of every JSON line."""
    if not path.is_file():
        raise PipelineConfigError(f"probe file not found: {path}")
    texts = [
        str(json.loads(line)["text"])
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    if not texts:
        raise PipelineConfigError(f"probe file has no messages: {path}")
    return texts


def choose_encoder(
    float32: Scores,
    cpu: Scores,
    probes: list[str],
    *,
    max_deviation: float = _MAX_DEVIATION,
    min_speedup: float = _MIN_SPEEDUP,
) -> EncoderChoice:
    """Score ``probes`` with both pipelines and decide which encoder to serve: the CPU one when
    every probability is within ``max_deviation`` of float32's and it used ``min_speedup``
    times less CPU time (each is warmed up once on a few probes first)."""
    warm = probes[: min(len(probes), 8)]
    float32(warm)
    cpu(warm)
    started = time.process_time()
    want = float32(probes)
    float32_s = time.process_time() - started
    started = time.process_time()
    got = cpu(probes)
    cpu_s = time.process_time() - started
    speedup = float32_s / cpu_s if cpu_s > 0 else float("inf")
    gaps = {name: float(np.abs(got[name] - want[name]).max()) for name in want}
    worst = max(gaps, key=gaps.__getitem__)
    changes = sum(
        int((np.argmax(got[n], axis=1) != np.argmax(want[n], axis=1)).sum()) for n in want
    )
    measured = {
        "max_deviation": gaps[worst],
        "deviation_output": worst,
        "top_class_changes": changes,
        "speedup": round(speedup, 3),
        "probes": len(probes),
    }
    if not np.isfinite(gaps[worst]) or gaps[worst] > max_deviation:
        reason = f"deviation {gaps[worst]:.4f} on {worst} exceeds {max_deviation}"
        return EncoderChoice(FLOAT32, reason, **measured)  # type: ignore[arg-type]
    if speedup < min_speedup:
        reason = f"speed-up {speedup:.2f} below {min_speedup}"
        return EncoderChoice(FLOAT32, reason, **measured)  # type: ignore[arg-type]
    reason = f"within {max_deviation}, speed-up {speedup:.2f}"
    return EncoderChoice(CPU, reason, **measured)  # type: ignore[arg-type]


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


def _number(params: dict[str, str], key: str, default: float) -> float:
    try:
        value = float(params.get(key, str(default)))
    except ValueError as exc:
        raise PipelineConfigError(f"{key} must be a number: {params[key]!r}") from exc
    if not np.isfinite(value) or value < 0:
        raise PipelineConfigError(f"{key} must be a finite number >= 0: {value}")
    return value


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
        threads = max(1, int(params.get("intra_op_threads", "0")) or (os.cpu_count() or 1))
        providers = _providers(args)
        self._encoder = _session(file("encoder_file"), threads, providers, ENCODER_UNFUSED)
        self.encoder_path = file("encoder_file")
        """The encoder file this instance runs (float32 or the CPU one)."""
        self._embedding_width = int(
            next(o.shape[1] for o in self._encoder.get_outputs() if o.name == _EMBEDDING)
        )
        self._chunk_rows = max(1, int(params.get("chunk_rows", str(_CHUNK_ROWS))))
        self._outputs = [o["name"] for o in config["output"]]
        self._widths = {o["name"]: int(o["dims"][-1]) for o in config["output"]}
        unknown = set(self._outputs) - set(OUTPUT_HEADS)
        if unknown:
            raise PipelineConfigError(f"outputs without a head: {sorted(unknown)}")
        self._heads = {
            output: _session(file(OUTPUT_HEADS[output]), 1, ["CPUExecutionProvider"])
            for output in self._outputs
        }
        self._head_inputs = {name: _head_input(head) for name, head in self._heads.items()}
        self._analyzer: Any = None
        if _FEATURES in self._head_inputs.values():
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

            self._analyzer = SentimentIntensityAnalyzer()
        self.choice = self._choose(params, file, threads, providers)
        """Which encoder this instance serves and why (logged, and a gauge inside Triton)."""
        self._report(args.get("model_name", folder.name))

    def _choose(
        self,
        params: dict[str, str],
        file: Callable[[str], Path],
        threads: int,
        providers: list[Any],
    ) -> EncoderChoice:
        if providers != ["CPUExecutionProvider"]:
            return EncoderChoice(FLOAT32, "running on a GPU")
        if "cpu_encoder_file" not in params:
            return EncoderChoice(FLOAT32, "no cpu_encoder_file configured")
        cpu_path = file("cpu_encoder_file")
        probes = read_probes(file("probe_file"))  # a configured CPU encoder needs its probes
        max_deviation = _number(params, "cpu_encoder_max_deviation", _MAX_DEVIATION)
        min_speedup = _number(params, "cpu_encoder_min_speedup", _MIN_SPEEDUP)
        if not cpu_path.is_file():
            return EncoderChoice(FLOAT32, f"cpu encoder file not found: {cpu_path.name}")
        float32_session = self._encoder
        cpu_session = _session(cpu_path, threads, providers, ENCODER_UNFUSED)
        choice = choose_encoder(
            lambda texts: self._scores(texts, float32_session),
            lambda texts: self._scores(texts, cpu_session),
            probes,
            max_deviation=max_deviation,
            min_speedup=min_speedup,
        )
        if choice.encoder == CPU:
            self._encoder = cpu_session
            self.encoder_path = cpu_path
        return choice

    def _report(self, model: str) -> None:
        line = json.dumps({"event": "encoder_chosen", "model": model, **self.choice.as_fields()})
        self._metrics: list[Any] = []
        self._families: list[Any] = []
        try:
            import triton_python_backend_utils as pb_utils  # only inside Triton's Python stub
        except ImportError:
            _log.info(line)
            return
        if self.choice.encoder == FLOAT32 and self.choice.max_deviation is not None:
            pb_utils.Logger.log_warn(line)  # a CPU encoder was tried and refused
        else:
            pb_utils.Logger.log_info(line)
        serving = pb_utils.MetricFamily(
            name="modstream_model_encoder",
            description="1 for the encoder this moderation model serves (cpu or float32)",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        deviation = pb_utils.MetricFamily(
            name="modstream_model_encoder_deviation",
            description="largest head-probability gap of the CPU encoder to float32 on probes",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        speedup = pb_utils.MetricFamily(
            name="modstream_model_encoder_speedup",
            description="float32 CPU time over the CPU encoder's on the probe messages",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        self._families = [serving, deviation, speedup]
        for encoder in (CPU, FLOAT32):
            metric = serving.Metric(labels={"model": model, "encoder": encoder})
            metric.set(1.0 if encoder == self.choice.encoder else 0.0)
            self._metrics.append(metric)
        for family, value in (
            (deviation, self.choice.max_deviation),
            (speedup, self.choice.speedup),
        ):
            if value is not None:
                metric = family.Metric(labels={"model": model})
                metric.set(float(value))
                self._metrics.append(metric)

    def scores(self, texts: list[str]) -> dict[str, Array]:
        """Probabilities per output for these texts, one row each (the whole pipeline)."""
        return self._scores(texts, self._encoder)

    def _scores(self, texts: list[str], encoder: ort.InferenceSession) -> dict[str, Array]:
        if not texts:
            return {n: np.zeros((0, self._widths[n]), np.float32) for n in self._outputs}
        encodings = self._tokenizer.encode_batch([self._prefix + t for t in texts])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        wanted = {self._head_inputs[name] for name in self._outputs}
        # The encoder's features end with the embedding, so one output serves both kinds of head.
        output = _FEATURES if _FEATURES in wanted else _EMBEDDING
        encoded: Array | None = None
        for rows in _length_chunks(mask, self._chunk_rows):
            chunk_mask = _trim(mask[rows])
            feed = {"input_ids": ids[rows, : chunk_mask.shape[1]], "attention_mask": chunk_mask}
            part = np.asarray(encoder.run([output], feed)[0], dtype=np.float32)
            if encoded is None:
                encoded = np.empty((len(texts), part.shape[1]), dtype=np.float32)
            encoded[rows] = part
        assert encoded is not None  # texts is not empty, so there was at least one chunk
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
        results = self.scores(texts)
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
        self._metrics.clear()  # metrics go before their families
        self._families.clear()
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
