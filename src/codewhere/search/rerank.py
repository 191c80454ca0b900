"""Re-ranking the fused top N with a cross-encoder: pure reordering, plus the text it reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

MAX_CONTENT_BYTES = 2048  # what a cross-encoder reads of a chunk: the head holds the signature and docstring


class PairScorer(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """One score per text, higher is better; None when the model failed (the fused order stands)."""
        ...


def rerank_text(path: str, text: str) -> str:
    """The path line plus at most MAX_CONTENT_BYTES of the chunk, cut at a character boundary."""
    head = text.encode("utf-8")[:MAX_CONTENT_BYTES].decode("utf-8", errors="ignore")
    return f"{path}\n{head}"


def reorder(ids: Sequence[int], scores: Sequence[float]) -> list[int]:
    """The first len(scores) ids by descending score (ties keep their fused order); the rest after, unchanged."""
    top = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [ids[i] for i in top] + list(ids[len(scores):])
