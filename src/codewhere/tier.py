"""The quality tier: MiniLM's vectors beside the static default's, filled without making anyone wait.

The static default answers at once; a transformer knows what words mean in context ("saved
logins" → `get_netrc_auth`) but embeds 40-100× slower. So an index keeps the static vectors it
is built with and, where the tier is on (`index.quality`, `codewhere index --quality`), a second
set from `onnx:minilm` for every chunk text, each text cut at TIER_MAX_TOKENS (128: the requests
study scores the same as at MiniLM's 256, and the fill is a third faster). `mcp`, `serve` and
`watch` fill it in the background once the index is complete, a page of texts at a time, each
page written under the writer lock only when no refresh holds it, at the lowest CPU priority. A
search uses the tier only when it covers every text of the index (a partial tier would rank the
covered texts against the uncovered by different models), and then ranks with the set fitted
for MiniLM; otherwise the static vectors answer as before. A one-shot CLI search never waits for
the fill; an edit makes the tier partial until the next page covers the new texts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np

from codewhere.embed.base import Embedder
from codewhere.store import SearchReader
from codewhere.store.base import ChunkAt
from codewhere.store.quantized import QUANTIZE_FROM, QuantizedVectors
from codewhere.store.sqlite import SqliteStore
from codewhere.types import ChunkRow, Filters, TermQuery

TIER_MODEL = "onnx:minilm"
TIER_MAX_TOKENS = 128
FILL_PAGE = 64  # texts embedded, then committed, at a time: a killed fill keeps every page it wrote


@dataclass(frozen=True)
class Coverage:
    done: int
    total: int

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done >= self.total

    def line(self) -> str:
        if self.complete:
            return f"quality tier ({TIER_MODEL}): complete, {self.total:,} texts"
        return f"quality tier ({TIER_MODEL}): {self.done:,} of {self.total:,} texts embedded; searches use the static vectors until it is complete"


def load_tier_embedder(threads: int | None = None) -> Embedder:
    """MiniLM at the tier's length; `threads`: onnxruntime's threads (a background fill takes one
    core and leaves the other to searches; default: every core)."""
    from codewhere.embed.onnx import load_onnx

    return load_onnx(TIER_MODEL.partition(":")[2], TIER_MAX_TOKENS, threads)


def fill(
    store: SqliteStore, embedder: Embedder, write_lock: Callable[[], AbstractContextManager[object]],
    stop: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Coverage | None:
    """Embed the texts without a tier vector, a page at a time, until none is left or `stop` is
    set; None when the tier was whole already (nothing read). `write_lock()` is a context manager
    held while the index is written (the index's writer lock); it may raise to skip this round
    (another process is indexing), which ends the fill."""
    if store.tier_complete() and store.tier_model() == embedder.info:
        return None
    with write_lock():
        store.bind_tier_model(embedder.info)
        store.delete_orphan_tier_vectors()
    done, total = store.tier_coverage()
    while not (stop is not None and stop.is_set()):
        page = store.tier_texts_missing(FILL_PAGE)
        if not page:
            with write_lock():  # no refresh between this look and the mark: searches may trust it
                if store.mark_tier_complete():
                    break
            continue
        vectors = embedder.embed_documents([text for _, text in page])
        with write_lock():
            store.add_tier_vectors([h for h, _ in page], vectors)
        done = min(done + len(page), total)  # a refresh between pages may add texts: the bar stays below its end
        if progress is not None:
            progress(done, total)
    return Coverage(*store.tier_coverage())


def lower_priority() -> None:
    """This thread (and the threads it starts: onnxruntime's) at the lowest CPU priority: on
    Linux a thread is a task of its own, so searches and refreshes in the process keep theirs."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # not Linux, or not allowed: the fill still yields by pages
        pass


class TierVectors:
    """Every chunk's tier vector in memory: float32 for an exact product; past QUANTIZE_FROM, sign
    bits and byte codes, as the static vectors of a large index are (store/quantized.py): a
    Hamming shortlist ordered by the codes. Django's 47,660 tier vectors: 73 MB of float32 and a
    vector search of 5.8-6.8 ms, or 2.3-2.8 ms quantized (21 MB of arrays), keeping 99.4 % of the exact
    top 30 (benchmarks/tier_quantized.py). Float16 on disk either way."""

    def __init__(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.ids = ids
        matrix = np.asarray(vectors, np.float32)
        self.quantized = QuantizedVectors.of(matrix) if len(ids) >= QUANTIZE_FROM else None
        self.vectors = matrix if self.quantized is None else None
        self._every_row = np.ones(len(ids), bool)  # the shortlist's live rows: all of them

    def search(self, query: np.ndarray, limit: int) -> list[tuple[int, float]]:
        if not len(self.ids) or limit < 1:
            return []
        if self.vectors is None:
            assert self.quantized is not None
            rows, distances = self.quantized.nearest(np.asarray(query, np.float32), limit, self._every_row)
            order = np.lexsort((self.ids[rows], distances))  # nearest first, ties by chunk id
            return [(int(self.ids[r]), float(1.0 - d)) for r, d in zip(rows[order], distances[order], strict=True)]
        scores = self.vectors @ np.asarray(query, np.float32)
        k = min(limit, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.lexsort((self.ids[best], -scores[best]))]  # best first, ties by chunk id
        return [(int(self.ids[i]), float(scores[i])) for i in best]


class TierReader:
    """A SearchReader whose vector list comes from the tier; everything else from `base`."""

    def __init__(self, base: SearchReader, vectors: TierVectors) -> None:
        self.base = base
        self.tier = vectors
        self.location, self.repo, self.shared = base.location, base.repo, base.shared

    def vector_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[tuple[int, float]]:
        if filters.is_empty():
            return self.tier.search(query, limit)
        depth = limit * 4
        while True:  # the filters drop some: read deeper until `limit` pass or the tier is spent
            ranked = self.tier.search(query, depth)
            rows = self.base.chunk_rows([cid for cid, _ in ranked], filters)
            found = [(cid, score) for cid, score in ranked if cid in rows][:limit]
            if len(found) >= limit or depth >= len(self.tier.ids):
                return found
            depth *= 4

    def keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> list[tuple[int, float]]:
        return self.base.keyword_search(query, limit, filters)

    def file_keyword_search(self, query: TermQuery, limit: int, filters: Filters) -> dict[tuple[str, str], float]:
        return self.base.file_keyword_search(query, limit, filters)

    def chunks_defining_names(self, names: Sequence[str], filters: Filters, spelled: Sequence[str] = ()) -> dict[str, list[int]]:
        return self.base.chunks_defining_names(names, filters, spelled)

    def chunk_rows(self, ids: Sequence[int], filters: Filters) -> dict[int, ChunkRow]:
        return self.base.chunk_rows(ids, filters)

    def call_target_chunks(self, chunk_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        return self.base.call_target_chunks(chunk_ids)

    def chunk_at(self, path: str, line: int) -> ChunkAt | None:
        return self.base.chunk_at(path, line)

    def chunk_spans(self, filters: Filters) -> list[tuple[str, int, int]]:
        return self.base.chunk_spans(filters)

    def indexed_paths(self, filters: Filters) -> list[str]:
        return self.base.indexed_paths(filters)

    def interrupt(self) -> None:
        self.base.interrupt()


def reader(base: SearchReader, ids: np.ndarray, vectors: np.ndarray) -> SearchReader:
    """`base` with the tier's vectors (chunk ids `ids`, one row each) as its vector list."""
    return TierReader(base, TierVectors(ids, vectors))
