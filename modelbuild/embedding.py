"""Sentence embeddings with the built encoder, exactly as Triton computes them, cached on disk.

The session skips the same onnxruntime fusions as the serving model
(``pipeline_model.ENCODER_UNFUSED``), so the CPU encoder's floats are the served ones too.
Tokenisation matches the ``tokenizer`` model (``"query: "`` prefix, 64 tokens); batches are
sorted by length and trimmed to their longest row, which changes nothing in the result because
padding is masked. The cache maps each text to its encoder ``features`` row (whose last 384 values
are the embedding) and is tied to the encoder file's size and modification time, so a rebuilt
encoder starts a fresh cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

from modelbuild.encoder_graph import ENCODER_FEATURES, ENCODER_OUTPUT
from modelbuild.serving.pipeline_model import ENCODER_UNFUSED

__all__ = ["MAX_LENGTH", "PREFIX", "Embedder", "load_tokenizer"]

F32 = npt.NDArray[np.float32]
MAX_LENGTH = 64
PREFIX = "query: "
_PAD_ID = 1
_SAVE_EVERY = 4096


def load_tokenizer(path: Path, max_length: int = MAX_LENGTH) -> Tokenizer:
    """The XLM-R tokenizer with the serving model's truncation (padding is done per batch)."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    return tokenizer


class Embedder:
    """Embeds texts with ``encoder.onnx``; remembers every vector in ``cache_dir``."""

    def __init__(self, encoder: Path, tokenizer: Path, cache_dir: Path, threads: int = 2) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(encoder),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=list(ENCODER_UNFUSED),
        )
        self._tokenizer = load_tokenizer(tokenizer)
        stat = encoder.stat()
        self._stamp = f"{stat.st_size}:{int(stat.st_mtime)}"
        self._dir = cache_dir
        self._index: dict[str, int] = {}
        widths = {o.name: int(o.shape[1]) for o in self._session.get_outputs()}
        self._embedding_width = widths[ENCODER_OUTPUT]
        self._vectors = np.zeros((0, widths[ENCODER_FEATURES]), dtype=np.float32)
        self._load()

    def _load(self) -> None:
        meta = self._dir / "embeddings.json"
        if not meta.is_file():
            return
        data = json.loads(meta.read_text(encoding="utf-8"))
        if data.get("stamp") != self._stamp:
            return
        vectors = np.load(self._dir / "embeddings.npy")
        if vectors.shape != (len(data["texts"]), self._vectors.shape[1]):
            return
        self._vectors = vectors
        self._index = {t: i for i, t in enumerate(data["texts"])}

    def _save(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        texts = sorted(self._index, key=self._index.__getitem__)
        np.save(self._dir / "embeddings.npy", self._vectors)
        payload = {"stamp": self._stamp, "texts": texts}
        (self._dir / "embeddings.json").write_text(json.dumps(payload, ensure_ascii=False))

    def encode_ids(self, texts: list[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Token ids and mask, padded to the longest row, as the serving tokenizer would give."""
        encodings = self._tokenizer.encode_batch([PREFIX + t for t in texts])
        length = max(len(e.ids) for e in encodings)
        ids = np.full((len(texts), length), _PAD_ID, dtype=np.int64)
        mask = np.zeros((len(texts), length), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        return ids, mask

    def run(self, texts: list[str], batch_size: int = 64) -> F32:
        """Encoder features without the cache (length-sorted batches)."""
        out = np.zeros((len(texts), self._vectors.shape[1]), dtype=np.float32)
        lengths = [len(e.ids) for e in self._tokenizer.encode_batch([PREFIX + t for t in texts])]
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = self.encode_ids([texts[i] for i in rows])
            (vec,) = self._session.run(
                [ENCODER_FEATURES], {"input_ids": ids, "attention_mask": mask}
            )
            out[rows] = vec
        return out

    def embed(self, texts: list[str]) -> F32:
        """Embeddings ``[n, 384]``, computing only texts not already cached."""
        return self.features(texts)[:, -self._embedding_width :]

    def features(self, texts: list[str]) -> F32:
        """The encoder's ``features`` ``[n, 384 * k]``, computing only texts not yet cached."""
        missing = sorted({t for t in texts if t not in self._index})
        for start in range(0, len(missing), _SAVE_EVERY):
            chunk = missing[start : start + _SAVE_EVERY]
            fresh = self.run(chunk)
            base = len(self._vectors)
            self._vectors = np.concatenate([self._vectors, fresh])
            for i, text in enumerate(chunk):
                self._index[text] = base + i
            self._save()  # an interrupted build resumes from here
        return self._vectors[[self._index[t] for t in texts]]
