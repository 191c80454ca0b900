"""sentence-transformers models by local folder or Hugging Face id (`st:NAME`), under the
optional `transformers` extra. PyTorch is imported only here, only when such a model is asked for."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from codewhere.embed.base import normalise_rows
from codewhere.embed.conventions import convention_for
from codewhere.errors import ModelError
from codewhere.types import ModelInfo

BATCH_SIZE = 32
INSTALL_HINT = "pip install 'codewhere[transformers]' torch==2.13.0 (a CPU build)"


def _folder_fingerprint(folder: Path) -> str:
    """Hash of the weight files' names and sizes plus the config: cheap, and changes with the weights."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in {".safetensors", ".bin", ".json", ".onnx"}:
            digest.update(f"{path.relative_to(folder)}:{path.stat().st_size}".encode())
            if path.suffix == ".json" and path.stat().st_size < 1_000_000:
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class SentenceTransformerEmbedder:
    def __init__(self, name: str, max_seq_length: int | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelError("sentence-transformers is not installed", INSTALL_HINT) from exc
        folder = Path(name).expanduser()
        source = str(folder.resolve()) if folder.is_dir() else name
        self.convention = convention_for(name)
        try:
            self._model = SentenceTransformer(source, device="cpu")
        except OSError as exc:
            raise ModelError(f"cannot load sentence-transformers model {name!r}: {exc}".split("\n")[0],
                             "pass a local folder, or a Hugging Face id with network access") from exc
        self.max_seq_length = max_seq_length or min(self.convention.max_seq_length, self._model.max_seq_length or 512)
        self._model.max_seq_length = self.max_seq_length
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = int(dimension() or self._model.encode(["x"]).shape[1])
        weights = _folder_fingerprint(folder) if folder.is_dir() else json.dumps(name)
        self._info = ModelInfo(f"st:{source}", dim, f"st:{weights}:{self.max_seq_length}")
        self.documents_truncated = 0

    @property
    def info(self) -> ModelInfo:
        return self._info

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.encode(list(texts), batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
        return normalise_rows(np.asarray(vectors, np.float32))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._info.dim), np.float32)
        prefixed = [self.convention.document_prefix + t for t in texts]
        tokenizer = self._model.tokenizer
        lengths = tokenizer(prefixed, add_special_tokens=True, truncation=False, return_length=True)["length"]
        self.documents_truncated += sum(1 for n in lengths if n > self.max_seq_length)
        return self._encode(prefixed)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([self.convention.query_prefix + text])[0]
