"""The Embedder protocol every provider implements, and what the index records of a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from codewhere.types import ModelInfo


@runtime_checkable
class Embedder(Protocol):
    @property
    def info(self) -> ModelInfo: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalised. Model-specific document prefixes go here."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32, L2-normalised. Model-specific query prefixes go here."""
        ...


@runtime_checkable
class TruncatingEmbedder(Embedder, Protocol):
    """An embedder whose model reads at most `max_seq_length` tokens of a text: it counts the
    documents it cut, so an index run can say how many."""

    max_seq_length: int
    documents_truncated: int


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


def length_sorted_batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Indices of `texts` in batches of similar length, so no batch pads short texts to long ones."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
