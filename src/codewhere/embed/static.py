"""Static (model2vec-format) embeddings: a token-vector table, mean-pooled. No torch."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from codewhere.embed.base import length_sorted_batches, normalise_rows
from codewhere.errors import ModelError
from codewhere.types import ModelInfo

MAX_TOKENS = 2048  # a chunk is ~700 tokens by the 4-chars rule; wordpieces run longer
BATCH = 512


class StaticEmbedder:
    def __init__(
        self,
        model_id: str,
        tokenizer: Tokenizer,
        vectors: np.ndarray,
        weights: np.ndarray | None = None,
        mapping: np.ndarray | None = None,
        fingerprint: str | None = None,
    ) -> None:
        self._tokenizer = tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        # kept as stored (the default model: float16) until documents are embedded: a float32
        # copy of the table takes 12 ms, which a search that embeds one question never repays
        # (each row converts exactly, so both ways give the same vectors)
        self._stored = vectors
        self._table: np.ndarray | None = vectors if vectors.dtype == np.float32 else None
        self._weights = weights.astype(np.float32) if weights is not None else None
        self._mapping = mapping
        digest = fingerprint or hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest()
        self._info = ModelInfo(model_id, int(vectors.shape[1]), digest)

    @property
    def info(self) -> ModelInfo:
        return self._info

    def __getstate__(self) -> dict[str, object]:
        """Pickled for the worker processes without the float32 copy, which each makes if it needs it."""
        state = dict(self.__dict__)
        if self._stored.dtype != np.float32:
            state["_table"] = None
        return state

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._table is None and len(texts) > 1:
            self._table = self._stored.astype(np.float32)
        table = self._stored if self._table is None else self._table
        out = np.zeros((len(texts), self._info.dim), dtype=np.float32)
        for batch in length_sorted_batches(texts, BATCH):
            encodings = self._tokenizer.encode_batch_fast([texts[i] for i in batch], add_special_tokens=False)
            for row, encoding in zip(batch, encodings, strict=True):
                ids = np.asarray(encoding.ids[:MAX_TOKENS], dtype=np.int64)
                if not len(ids):
                    continue
                rows = table[self._mapping[ids] if self._mapping is not None else ids].astype(np.float32, copy=False)
                if self._weights is not None:
                    rows = rows * self._weights[ids][:, None]
                out[row] = rows.mean(axis=0)
        return normalise_rows(out)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]


_MODEL_FILES = ("model.safetensors", "tokenizer.json", "config.json")
_loaded: dict[tuple[str, str], tuple[tuple[int, ...], StaticEmbedder]] = {}  # one model a folder: the latest read
_loading = threading.Lock()


def load_folder(folder: Path, model_id: str) -> StaticEmbedder:
    """A model2vec folder's model, read once per process while its files stay as they are: a
    process that opens several indexes (an MCP server, an eval, a benchmark) reads the tokenizer
    (13 ms) and the table once, as semble's loader does. Its state is fixed once made (the float32
    table is made at most once), so indexes share it."""
    key, stamps = (str(folder), model_id), _file_stamps(folder)
    with _loading:
        held = _loaded.get(key)
        if held is None or held[0] != stamps:
            held = _loaded[key] = (stamps, _read_folder(folder, model_id))
    return held[1]


def _file_stamps(folder: Path) -> tuple[int, ...]:
    stamps: list[int] = []
    for name in _MODEL_FILES:
        try:
            info = (folder / name).stat()
            stamps += [info.st_size, info.st_mtime_ns, info.st_ino]
        except OSError:
            stamps += [-1, -1, -1]
    return tuple(stamps)


def _read_folder(folder: Path, model_id: str) -> StaticEmbedder:
    """Read a model2vec folder directly: 4x faster than `StaticModel.from_pretrained`, which matters
    because every CLI search process loads the model before it can embed the query."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(folder / "model.safetensors"))
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").exists() else {}
    except (OSError, ValueError, Exception) as exc:  # safetensors and tokenizers raise their own types
        raise ModelError(
            f"{folder} is not a readable model2vec model ({exc})", "pass a folder saved by model2vec, or a Hugging Face id"
        ) from exc
    if "embeddings" not in tensors:
        raise ModelError(f"{folder}/model.safetensors has no 'embeddings' tensor", "pass a folder saved by model2vec")
    return StaticEmbedder(
        model_id, tokenizer, tensors["embeddings"], tensors.get("weights"), tensors.get("mapping"),
        fingerprint=config.get("source_fingerprint") and f"{config.get('recipe')}:{config['source_fingerprint']}",
    )


def load_hub(name: str) -> StaticEmbedder:
    """Any model2vec model by Hugging Face id, through model2vec's own loader (needs a network
    the first time; later from the Hugging Face cache)."""
    try:
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(name, force_download=False)
    except Exception as exc:  # network, auth, missing repo: all end the same way for the user
        raise ModelError(
            f"could not load the model2vec model {name!r} ({type(exc).__name__}: {str(exc)[:200]})",
            "check the name and the network, or pass a local model folder with --model",
        ) from exc
    return StaticEmbedder(name, model.tokenizer, np.asarray(model.embedding), model.weights, model.token_mapping)
