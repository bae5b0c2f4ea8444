"""``modstream models train``: fine-tune the encoder, fit and calibrate the heads, write what a
fresh clone builds from.

Steps (2 CPU cores: about an hour, a heads-only round about 15 minutes; CI never trains):

1. the training set (:mod:`modelbuild.tuning_data`): every task's training examples, the
   written and template lines with their harm labels, real Chinese customer-service dialogues
   and real English text messages (training conversations only);
2. the fine-tune (:mod:`modelbuild.finetune`): adapters on the top blocks and the multi-task
   heads, deterministic;
3. the served heads (:mod:`modelbuild.head_fit`): fitted again on the tuned encoder's
   embeddings of the same rows;
4. the insult output: logistic regression over the tuned embedding of the human-labelled
   comments of ``train.csv`` (which the fine-tune never saw), with the written insult lines and a
   sample of everyday lines beside them at a tenth of a comment's weight, 5-fold
   cross-validated on ``train.csv`` (the figure ``insult_cv_auc``);
5. calibration: one temperature per head (:mod:`modelbuild.temperature`) on held-out
   examples: the task examples' held-out split, the held-out written and template lines, and
   the out-of-fold insult scores;
6. files: ``model_repository/encoder/delta.npz`` (the adapters, float16),
   ``model_repository/moderation/heads/{sentiment,intent,toxicity,harms}.onnx`` and
   ``model_repository/moderation/training.json`` (the data manifest, settings, fingerprints,
   times and figures). ``modstream models build`` turns them into the served model.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from modelbuild import datasets
from modelbuild.build import SEED, BuildError, BuildPaths, e5_file, load_task_data
from modelbuild.e5_weights import read_e5
from modelbuild.embedding import PREFIX, Embedder, load_tokenizer
from modelbuild.encoder_delta import save_delta
from modelbuild.finetune import Batch, TrainConfig, TrainExample, Tuner, make_batches
from modelbuild.harm_labels import HARMS, HarmLine, harm_lines
from modelbuild.head_fit import HEAD_L2, fit_binary, fit_heads
from modelbuild.heads import Dense, Head, save_head
from modelbuild.real_text import INSULT_FOLDS, LabelledLine, RealText, fold_of, load_real_text
from modelbuild.sources import fetch_all
from modelbuild.teacher import HateSonar, ProfanityCheck, clean_lines, hatesonar_none
from modelbuild.temperature import fit_temperature, logits_of, scaled
from modelbuild.tuning_data import TASKS, training_examples

__all__ = [
    "HEAD_TASKS",
    "TrainPaths",
    "comment_texts",
    "examples_of",
    "insult_output",
    "insult_rows",
    "train",
]

F32 = npt.NDArray[np.float32]
Log = Callable[..., None]
HEAD_TASKS: dict[str, int] = {
    **{t: len(labels) for t, labels in TASKS.items()},
    "harms": len(HARMS),
}
_PAD_ID = 1
_INSULT = HARMS.index("insult")
_INSULT_L2 = 0.25
_EVERYDAY_FOR_INSULT = 8000
"""Real everyday rows (insult 0) beside the comments when the insult output is fitted."""
INSULT_ROW_WEIGHT = 0.1
"""The weight of a written or everyday row beside a human-labelled comment (weight 1) in the
insult output's fit: at 1 the written lines pulled the output away from the comments (5-fold
AUC 0.892 against 0.923)."""


class TrainPaths:
    """Where training reads and writes, beside the build's paths."""

    def __init__(self, build: BuildPaths) -> None:
        self.build = build
        self.delta = build.repository / "encoder" / "delta.npz"
        self.heads = build.repository / "moderation" / "heads"
        self.manifest = build.repository / "moderation" / "training.json"

    def head(self, task: str) -> Path:
        return self.heads / f"{task}.onnx"


def _batches(tokenizer: Any, texts: Sequence[str], size: int, seed: int) -> list[Batch]:
    encodings = tokenizer.encode_batch([PREFIX + t for t in texts])
    out = []
    for rows in make_batches([len(e.ids) for e in encodings], size, seed):
        length = max(len(encodings[r].ids) for r in rows)
        ids = np.full((len(rows), length), _PAD_ID, dtype=np.int64)
        mask = np.zeros((len(rows), length), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(encodings[r].ids)] = encodings[r].ids
            mask[i, : len(encodings[r].ids)] = 1
        out.append(Batch(rows, ids, mask))
    return out


def _labels(examples: Sequence[TrainExample]) -> tuple[dict[str, Any], Any]:
    import torch

    labels = {
        task: torch.tensor([getattr(e, task) for e in examples], dtype=torch.int64)
        for task in TASKS
    }
    labels["harms"] = torch.tensor([e.harms for e in examples], dtype=torch.float32)
    weights = torch.tensor([e.weight for e in examples], dtype=torch.float32)
    return labels, weights


def comment_texts(comments: Sequence[LabelledLine]) -> list[str]:
    """The canonical texts of the comments: what the worker would send to the model."""
    from modelbuild.canonical_inputs import canonical_text

    return [canonical_text(c.text) for c in comments]


def _joint_head(tuner: Tuner, task: str) -> Head:
    """A fine-tune head as a :class:`Head` on the normalised embedding (the pool scale folded
    into its weights)."""
    layer = tuner.head_layers[task]
    weight = (layer.weight.detach().numpy().T * tuner.config.pool_scale).astype(np.float32)
    bias = layer.bias.detach().numpy().astype(np.float32)
    return Head((Dense(weight, bias),), multilabel=task == "harms")


def examples_of(
    archives: dict[str, Path],
    tasks: dict[str, datasets.TaskData],
    lines: Sequence[HarmLine],
    real: RealText,
    seed: int,
) -> list[TrainExample]:
    """The training rows (:func:`modelbuild.tuning_data.training_examples`), the film dialogue
    lines vetted by the two teachers."""
    vetted = clean_lines(
        list(real.movie_train),
        hatesonar_none(HateSonar(archives["hatesonar"])),
        ProfanityCheck(archives["profanity"]).predict_proba,
    )
    return training_examples(tasks, lines, real, seed, vetted)


def insult_rows(
    examples: Sequence[TrainExample], seed: int
) -> tuple[list[int], npt.NDArray[np.int64]]:
    """The training rows the insult output is fitted on beside the comments, and their labels:
    every row with a harm label of 1 (written and template lines; insult 1 or 0), and a seeded
    sample of the rows whose harms are all 0 (everyday lines, real and written)."""
    rng = np.random.default_rng(seed)
    labelled = [i for i, e in enumerate(examples) if e.harms[_INSULT] >= 0]
    everyday = [i for i in labelled if not any(h > 0 for h in examples[i].harms)]
    harmful = [i for i in labelled if any(h > 0 for h in examples[i].harms)]
    keep = sorted(rng.permutation(everyday)[:_EVERYDAY_FOR_INSULT].tolist() + harmful)
    y = np.array([int(examples[i].harms[_INSULT] > 0) for i in keep], dtype=np.int64)
    return keep, y


def insult_output(
    comments: Sequence[LabelledLine],
    comment_emb: F32,
    x_rows: F32,
    y_rows: npt.NDArray[np.int64],
    seed: int,
) -> tuple[F32, float, F32, dict[str, float]]:
    """The insult output's weights and bias (fitted on every comment and the rows), its
    out-of-fold logits on the comments (each fold's comments scored by the output fitted
    without them) and the cross-validated figures. ``comment_emb`` holds the tuned embeddings
    of the comments' canonical texts."""
    y_comments = np.array([c.label for c in comments], dtype=np.int64)
    folds = np.array([fold_of(c.key) for c in comments])
    row_weight = np.full(len(y_rows), INSULT_ROW_WEIGHT, dtype=np.float32)
    out_of_fold = np.zeros(len(comments), dtype=np.float32)
    for fold in range(INSULT_FOLDS):
        fit = folds != fold
        x = np.concatenate([comment_emb[fit], x_rows])
        y = np.concatenate([y_comments[fit], y_rows])
        weight = np.concatenate([np.ones(int(fit.sum()), dtype=np.float32), row_weight])
        w, b = fit_binary(x, y, _INSULT_L2, seed, weight)
        out_of_fold[~fit] = comment_emb[~fit] @ w + b
    w, b = fit_binary(
        np.concatenate([comment_emb, x_rows]),
        np.concatenate([y_comments, y_rows]),
        _INSULT_L2,
        seed,
        np.concatenate([np.ones(len(comments), dtype=np.float32), row_weight]),
    )
    from sklearn.metrics import average_precision_score, roc_auc_score

    figures = {
        "insult_cv_auc": float(roc_auc_score(y_comments, out_of_fold)),
        "insult_cv_auprc": float(average_precision_score(y_comments, out_of_fold)),
    }
    return w, b, out_of_fold, figures


def train(
    paths: BuildPaths, config: TrainConfig, log: Log, *, heads_only: bool = False
) -> dict[str, Any]:
    """Run every step; returns the manifest written to ``training.json``. With ``heads_only``
    the fine-tune is not run again: the adapters of the last one (its checkpoint in the work
    folder) are taken, and the heads, insult output, calibration and files are redone."""
    out = TrainPaths(paths)
    start = time.monotonic()
    if not paths.tokenizer.is_file():
        raise BuildError("the tokenizer is not built: run `modstream models build` first")
    archives = fetch_all(paths.cache)
    e5_path = e5_file(paths, archives)
    tokenizer = load_tokenizer(paths.tokenizer)
    tasks = load_task_data(archives, SEED)
    real = load_real_text(archives)
    lines = harm_lines(SEED)
    examples = examples_of(archives, tasks, lines, real, SEED)
    data = _manifest_of_data(examples, tasks, real, lines)
    log("finetune_data", rows=len(examples))
    checkpoint = paths.work / "finetune.npz"
    if heads_only:
        if not checkpoint.is_file():
            raise BuildError("no fine-tune checkpoint: run `modstream models train` first")
        state = _read_checkpoint(checkpoint)
    else:
        state = _finetune(tokenizer, read_e5(e5_path), examples, config, log)
        state["timings_s"]["data_s"] = round(time.monotonic() - start - state["total"], 1)
        _write_checkpoint(checkpoint, state)
    save_delta(state["delta"], out.delta)

    step = time.monotonic()
    from modelbuild.build import _build_encoder

    if not _encoder_is_current(paths, state["delta"].fingerprint()):
        _build_encoder(paths, e5_path, log, tuned=True)
    embedder = Embedder(paths.tuned_encoder, paths.tokenizer, paths.work / "tuned_embeddings")
    x_examples = embedder.embed([e.text for e in examples])
    heads = fit_heads(x_examples, examples, HEAD_TASKS, seed=config.seed, log=log)
    comments = real.insults
    keep, y_rows = insult_rows(examples, config.seed)
    w_insult, b_insult, oof, insult_figures = insult_output(
        comments, embedder.embed(comment_texts(comments)), x_examples[keep], y_rows, config.seed
    )
    harms = heads["harms"].layers[0]
    harm_w, harm_b = harms.weight.copy(), harms.bias.copy()
    harm_w[:, _INSULT], harm_b[_INSULT] = w_insult, b_insult
    heads["harms"] = Head((Dense(harm_w, harm_b),), multilabel=True)
    temperatures = _calibrate(heads, embedder, tasks, lines, comments, oof, config.seed)
    for task, head in heads.items():
        save_head(head, task, out.head(task))
    timings = dict(state["timings_s"])
    timings["heads_s"] = round(time.monotonic() - step, 1)

    manifest: dict[str, Any] = {
        "config": asdict(config),
        "heads": {"l2": HEAD_L2, "insult_l2": _INSULT_L2, "insult_row_weight": INSULT_ROW_WEIGHT},
        "data": data,
        "losses": [round(v, 5) for v in state["losses"]],
        "temperatures": temperatures,
        "figures": {k: round(v, 4) for k, v in insult_figures.items()},
        "delta_fingerprint": state["delta"].fingerprint(),
        "timings_s": timings,
    }
    out.manifest.parent.mkdir(parents=True, exist_ok=True)
    out.manifest.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def _encoder_is_current(paths: BuildPaths, fingerprint: str) -> bool:
    """Whether the tuned encoder files were built from the delta with ``fingerprint`` (then the
    build is not repeated, and the embedding cache, keyed on the file, stays valid)."""
    stamp = paths.tuned_stamp
    return (
        paths.tuned_encoder.is_file()
        and paths.tuned_cpu_encoder.is_file()
        and stamp.is_file()
        and stamp.read_text(encoding="utf-8").strip() == fingerprint
    )


def _finetune(
    tokenizer: Any,
    weights: Any,
    examples: Sequence[TrainExample],
    config: TrainConfig,
    log: Log,
) -> dict[str, Any]:
    """The fine-tune: adapters and the multi-task heads (uncalibrated), losses and times."""
    started = time.monotonic()
    tuner = Tuner(weights, config, HEAD_TASKS, log)
    batches = _batches(tokenizer, [e.text for e in examples], config.batch_size, config.seed)
    states = []
    for count, batch in enumerate(batches, start=1):
        states.append(tuner.bottom(batch.ids, batch.mask).half())
        if count % 200 == 0:
            log("frozen_blocks_progress", batch=count, batches=len(batches))
    frozen_s = time.monotonic() - started
    step = time.monotonic()
    labels, row_weights = _labels(examples)
    losses = tuner.fit(states, batches, labels, row_weights)
    return {
        "delta": tuner.delta(),
        "heads": {task: _joint_head(tuner, task) for task in HEAD_TASKS},
        "losses": losses,
        "timings_s": {
            "frozen_blocks_s": round(frozen_s, 1),
            "finetune_s": round(time.monotonic() - step, 1),
        },
        "total": time.monotonic() - started,
    }


def _write_checkpoint(path: Path, state: dict[str, Any]) -> None:
    arrays: dict[str, Any] = {
        "losses": np.asarray(state["losses"], dtype=np.float64),
        "timings": np.asarray(json.dumps(state["timings_s"])),
    }
    for task, head in state["heads"].items():
        arrays[f"head.{task}.weight"] = head.layers[0].weight
        arrays[f"head.{task}.bias"] = head.layers[0].bias
    path.parent.mkdir(parents=True, exist_ok=True)
    save_delta(state["delta"], path.with_name("finetune_delta.npz"))
    np.savez(path, **arrays)


def _read_checkpoint(path: Path) -> dict[str, Any]:
    from modelbuild.encoder_delta import load_delta

    with np.load(path, allow_pickle=False) as data:
        heads = {
            task: Head(
                (Dense(data[f"head.{task}.weight"], data[f"head.{task}.bias"]),),
                multilabel=task == "harms",
            )
            for task in HEAD_TASKS
        }
        return {
            "delta": load_delta(path.with_name("finetune_delta.npz")),
            "heads": heads,
            "losses": [float(v) for v in data["losses"]],
            "timings_s": json.loads(str(data["timings"])),
        }


def _calibrate(
    heads: dict[str, Head],
    embedder: Embedder,
    tasks: dict[str, datasets.TaskData],
    lines: Sequence[Any],
    comments: Sequence[LabelledLine],
    out_of_fold: F32,
    seed: int,
) -> dict[str, Any]:
    """Fit and fold in a temperature per head (per harm output for the harms head)."""
    from modelbuild.canonical_inputs import canonical_text

    temperatures: dict[str, Any] = {}
    for task in TASKS:
        held = tasks[task].split(test=True)
        x = embedder.embed([e.text for e in held])
        y = np.array([e.label for e in held], dtype=np.int64)
        t = fit_temperature(logits_of(heads[task], x), y, multilabel=False)
        heads[task] = scaled(heads[task], t)
        temperatures[task] = round(t, 4)
    held_lines = [line for line in lines if datasets.held_out(seed, line.text)]
    x = embedder.embed([canonical_text(line.text) for line in held_lines])
    y = np.array([line.labels for line in held_lines], dtype=np.float32)
    head = heads["harms"]
    logits = logits_of(head, x)
    weight, bias = head.layers[0].weight.copy(), head.layers[0].bias.copy()
    per_harm: dict[str, float] = {}
    for column, harm in enumerate(HARMS):
        z, target = logits[:, column : column + 1], y[:, column : column + 1]
        if harm == "insult":
            comment_y = np.array([[c.label] for c in comments], dtype=np.float32)
            z = np.concatenate([z, out_of_fold[:, None]])
            target = np.concatenate([target, comment_y])
        t = fit_temperature(z, target, multilabel=True)
        weight[:, column] /= t
        bias[column] /= t
        per_harm[harm] = round(t, 4)
    heads["harms"] = Head((Dense(weight, bias),), multilabel=True)
    temperatures["harms"] = per_harm
    return temperatures


def _manifest_of_data(
    examples: Sequence[TrainExample],
    tasks: dict[str, datasets.TaskData],
    real: Any,
    lines: Sequence[Any],
) -> dict[str, Any]:
    harm_counts = Counter(
        f"{harm}={int(e.harms[i])}" for e in examples for i, harm in enumerate(HARMS)
    )
    return {
        "rows": len(examples),
        "task_fingerprints": {task: data.fingerprint() for task, data in tasks.items()},
        "real_zh_dialogue_lines_train": len(real.zh_train),
        "real_en_text_messages_train": len(real.en_train),
        "real_en_film_dialogue_lines_train": len(real.movie_train),
        "real_sms_train": len(real.sms_train),
        "insult_comments": len(real.insults),
        "written_and_template_lines": len(lines),
        "labelled_rows": {
            task: sum(1 for e in examples if getattr(e, task) >= 0) for task in TASKS
        },
        "harm_labels": dict(sorted(harm_counts.items())),
    }
