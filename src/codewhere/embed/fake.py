"""A deterministic embedder for tests: hashed bag of words. Implements the protocol, knows nothing."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from codewhere.embed.base import normalise_rows
from codewhere.types import ModelInfo


class FakeEmbedder:
    def __init__(self, dim: int = 32, name: str = "fake") -> None:
        self._info = ModelInfo(name, dim, f"fake-{name}-{dim}")
        self.documents_embedded = 0

    @property
    def info(self) -> ModelInfo:
        return self._info

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self._info.dim, dtype=np.float32)
        for word in re.findall(r"[a-z]+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
            v[h % self._info.dim] += 1.0
        return v

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents_embedded += len(texts)
        return normalise_rows(np.stack([self._vector(t) for t in texts])) if texts else np.zeros((0, self._info.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise_rows(self._vector(text)[None, :])[0]
