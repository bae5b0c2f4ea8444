"""Fine-tune the e5 encoder's top blocks with low-rank adapters and multi-task heads, on CPU.

The bottom blocks stay as packaged: their output for every training text is computed once
(no gradients) and kept in memory as float16, so each training step runs only the top
``tuned_blocks`` blocks. Every linear layer of those blocks gets an adapter ``W + scale * B @ A``
(``A`` small random, ``B`` zero, so training starts at the packaged encoder). The heads read the
last block's states mean-pooled and L2-normalised (the encoder's ``embedding``) and learn, at
once, sentiment, intent and toxicity (softmax, cross-entropy) and the harms (independent
sigmoids, binary cross-entropy). An unknown label (-1) adds nothing to the loss.

Deterministic: fixed seeds, fixed thread count, ``torch.use_deterministic_algorithms``,
batches made and ordered by a seeded generator. torch is needed only here
(``pip install -e .[train]``); the build applies the result with numpy
(:mod:`modelbuild.encoder_delta`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from modelbuild.e5_weights import E5Weights
from modelbuild.encoder_delta import LINEAR_NAMES, EncoderDelta

__all__ = ["Batch", "TrainConfig", "TrainExample", "Tuner", "make_batches"]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
UNKNOWN = -1
_BUCKETS = (8, 12, 16, 20, 24, 32, 40, 48, 64)
Log = Callable[..., None]


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """What the fine-tune does; every field is printed in the training manifest."""

    tuned_blocks: int = 4
    rank: int = 8
    alpha: float = 16.0
    epochs: int = 2
    batch_size: int = 32
    adapter_lr: float = 1e-3
    head_lr: float = 3e-3
    weight_decay: float = 0.01
    seed: int = 20261207
    threads: int = 2
    pool_scale: float = 20.0
    """The normalised embedding is multiplied by this before the heads (a fixed temperature)."""
    harm_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class TrainExample:
    """One text and its labels; -1 where the text says nothing about a task."""

    text: str
    sentiment: int
    intent: int
    toxicity: int
    harms: tuple[float, ...]
    weight: float = 1.0


@dataclass(slots=True)
class Batch:
    """Token ids, mask and labels of one batch (rows of similar length)."""

    rows: I64
    ids: I64
    mask: I64


def make_batches(lengths: Sequence[int], batch_size: int, seed: int) -> list[I64]:
    """Rows grouped into batches of similar token length: rows are bucketed by length, shuffled
    within their bucket by ``seed`` and cut into batches."""
    rng = random.Random(seed)
    buckets: dict[int, list[int]] = {}
    for row, length in enumerate(lengths):
        limit = next((b for b in _BUCKETS if length <= b), _BUCKETS[-1])
        buckets.setdefault(limit, []).append(row)
    out: list[I64] = []
    for limit in sorted(buckets):
        rows = buckets[limit]
        rng.shuffle(rows)
        for start in range(0, len(rows), batch_size):
            out.append(np.asarray(rows[start : start + batch_size], dtype=np.int64))
    return out


class Tuner:
    """The encoder in torch: frozen bottom blocks, adapted top blocks, multi-task heads."""

    def __init__(
        self, weights: E5Weights, config: TrainConfig, widths: dict[str, int], log: Log
    ) -> None:
        import torch

        self.torch = torch
        self.config = config
        self.weights = weights
        self.log = log
        torch.manual_seed(config.seed)
        torch.set_num_threads(config.threads)
        torch.use_deterministic_algorithms(True)
        cfg = weights.config
        self.hidden = cfg.hidden
        self.heads = cfg.heads
        self.eps = cfg.layer_norm_eps
        self.first_tuned = cfg.layers - config.tuned_blocks
        self.blocks = [
            {name: torch.from_numpy(np.asarray(getattr(layer, name))) for name in _FIELDS}
            for layer in weights.layers
        ]
        self.scale = config.alpha / config.rank
        self.adapters: dict[tuple[int, str], tuple[Any, Any]] = {}
        gen = torch.Generator().manual_seed(config.seed)
        for block in range(self.first_tuned, cfg.layers):
            for name in LINEAR_NAMES:
                out_dim, in_dim = self.blocks[block][name].shape
                a = torch.randn(config.rank, in_dim, generator=gen) / math.sqrt(in_dim)
                b = torch.zeros(out_dim, config.rank)
                self.adapters[(block, name)] = (
                    a.requires_grad_(True),
                    b.requires_grad_(True),
                )
        self.head_layers: dict[str, Any] = {}
        for task, width in widths.items():
            layer = torch.nn.Linear(cfg.hidden, width)
            torch.nn.init.normal_(layer.weight, std=0.01, generator=gen)
            torch.nn.init.zeros_(layer.bias)
            self.head_layers[task] = layer

    # ------------------------------------------------------------------ forward pieces
    def _linear(self, x: Any, block: int, name: str, bias: str) -> Any:
        weight = self.blocks[block][name]
        y = x @ weight.T + self.blocks[block][bias]
        adapter = self.adapters.get((block, name))
        if adapter is not None:
            a, b = adapter
            y = y + (x @ a.T @ b.T) * self.scale
        return y

    def _block(self, x: Any, bias: Any, block: int) -> Any:
        torch = self.torch
        f = torch.nn.functional
        p = self.blocks[block]
        batch, length, _ = x.shape
        head_dim = self.hidden // self.heads

        def split(t: Any) -> Any:
            return t.reshape(batch, length, self.heads, head_dim).transpose(1, 2)

        q = split(self._linear(x, block, "q_w", "q_b"))
        k = split(self._linear(x, block, "k_w", "k_b"))
        v = split(self._linear(x, block, "v_w", "v_b"))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(head_dim) + bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, self.hidden)
        attn = self._linear(ctx, block, "attn_out_w", "attn_out_b")
        x = f.layer_norm(x + attn, (self.hidden,), p["attn_ln_w"], p["attn_ln_b"], self.eps)
        mid = f.gelu(self._linear(x, block, "ffn_in_w", "ffn_in_b"))
        ffn = self._linear(mid, block, "ffn_out_w", "ffn_out_b")
        return f.layer_norm(x + ffn, (self.hidden,), p["out_ln_w"], p["out_ln_b"], self.eps)

    def _bias(self, mask: Any) -> Any:
        return ((1.0 - mask.float()) * -10000.0)[:, None, None, :]

    def bottom(self, ids: I64, mask: I64) -> Any:
        """The frozen blocks' output for one batch (no gradients)."""
        torch = self.torch
        w = self.weights
        length = ids.shape[1]
        x = w.word_rows(ids) + w.positions[:length] + w.token_type
        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
            x = torch.nn.functional.layer_norm(
                x,
                (self.hidden,),
                torch.from_numpy(w.emb_ln_w),
                torch.from_numpy(w.emb_ln_b),
                self.eps,
            )
            bias = self._bias(torch.from_numpy(mask))
            for block in range(self.first_tuned):
                x = self._block(x, bias, block)
        return x

    def top(self, states: Any, mask: Any) -> Any:
        """The tuned blocks and the pooled, normalised embedding."""
        bias = self._bias(mask)
        x = states
        for block in range(self.first_tuned, len(self.blocks)):
            x = self._block(x, bias, block)
        m = mask.float()[:, :, None]
        pooled = (x * m).sum(1) / m.sum(1)
        return self.torch.nn.functional.normalize(pooled, dim=-1)

    # ------------------------------------------------------------------ training
    def parameters(self) -> tuple[list[Any], list[Any]]:
        adapters = [t for pair in self.adapters.values() for t in pair]
        heads = [p for layer in self.head_layers.values() for p in layer.parameters()]
        return adapters, heads

    def fit(
        self,
        states: list[Any],
        batches: list[Batch],
        labels: dict[str, Any],
        weights: Any,
    ) -> list[float]:
        """Train over the cached bottom states; returns the mean loss of each epoch."""
        torch = self.torch
        cfg = self.config
        adapters, heads = self.parameters()
        optimiser = torch.optim.AdamW(
            [
                {"params": adapters, "lr": cfg.adapter_lr},
                {"params": heads, "lr": cfg.head_lr},
            ],
            weight_decay=cfg.weight_decay,
        )
        steps = cfg.epochs * len(batches)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser, lambda step: min(1.0, (step + 1) / 100) * max(0.05, 1 - step / steps)
        )
        rng = random.Random(cfg.seed)
        losses: list[float] = []
        started = time.monotonic()
        done = 0
        for epoch in range(cfg.epochs):
            order = list(range(len(batches)))
            rng.shuffle(order)
            total = 0.0
            for count, index in enumerate(order, start=1):
                batch = batches[index]
                rows = torch.from_numpy(batch.rows)
                mask = torch.from_numpy(batch.mask)
                emb = self.top(states[index].float(), mask) * cfg.pool_scale
                loss = self._loss(emb, rows, labels, weights)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                schedule.step()
                total += float(loss.detach())
                done += len(batch.rows)
                if count % 200 == 0:
                    rate = done / (time.monotonic() - started)
                    self.log(
                        "finetune_progress",
                        epoch=epoch,
                        batch=count,
                        batches=len(batches),
                        loss=round(total / count, 4),
                        samples_per_s=round(rate, 1),
                    )
            losses.append(total / len(batches))
            self.log("finetune_epoch", epoch=epoch, loss=round(losses[-1], 4))
        return losses

    def _loss(self, emb: Any, rows: Any, labels: dict[str, Any], weights: Any) -> Any:
        torch = self.torch
        f = torch.nn.functional
        w = weights[rows]
        total = emb.new_zeros(())
        for task, layer in self.head_layers.items():
            logits = layer(emb)
            target = labels[task][rows]
            if task == "harms":
                known = (target >= 0).float()
                if known.sum() == 0:
                    continue
                per = f.binary_cross_entropy_with_logits(
                    logits, target.clamp(min=0), reduction="none"
                )
                loss = (per * known * w[:, None]).sum() / known.sum().clamp(min=1.0)
                total = total + self.config.harm_weight * loss
            else:
                known = target >= 0
                if not bool(known.any()):
                    continue
                per = f.cross_entropy(logits[known], target[known], reduction="none")
                total = total + (per * w[known]).sum() / known.sum()
        return total

    def embed(self, states: list[Any], batches: list[Batch], rows: int) -> F32:
        """The tuned embedding of every row (no gradients)."""
        torch = self.torch
        out = np.zeros((rows, self.hidden), dtype=np.float32)
        with torch.no_grad():
            for state, batch in zip(states, batches, strict=True):
                emb = self.top(state.float(), torch.from_numpy(batch.mask))
                out[batch.rows] = emb.numpy()
        return out

    def delta(self) -> EncoderDelta:
        """The adapters as an :class:`EncoderDelta` (what the build applies)."""
        adapters = {
            key: (a.detach().numpy().astype(np.float32), b.detach().numpy().astype(np.float32))
            for key, (a, b) in self.adapters.items()
        }
        blocks = tuple(range(self.first_tuned, len(self.blocks)))
        return EncoderDelta(blocks, self.config.rank, self.scale, adapters)


_FIELDS = (
    "q_w",
    "q_b",
    "k_w",
    "k_b",
    "v_w",
    "v_b",
    "attn_out_w",
    "attn_out_b",
    "attn_ln_w",
    "attn_ln_b",
    "ffn_in_w",
    "ffn_in_b",
    "ffn_out_w",
    "ffn_out_b",
    "out_ln_w",
    "out_ln_b",
)
