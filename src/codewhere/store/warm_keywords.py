"""BM25 over the chunks a warm reader holds: the store's keyword search, answered from memory.

SQLite's FTS5 scores every chunk matching any query term in C, but reads its posting lists from
pages and calls its ranking function row by row (Django: about 9 ms a question). Here each term's
postings are numpy arrays and a question is a few vector operations. The scores are FTS5's own
bm25 (k1 = 1.2, b = 0.75; a term's weight `log((N - n + 0.5) / (n + 0.5))`, at least 1e-6; a
column's matches counted times its weight; the row's length in tokens over both columns), over
the same tokens (`index_tokens` of path and text, as the indexer writes them), so the lists are
the store's: `tests/test_warm_store.py` compares them.

Tokens are worked out per file and kept with the file's content hash: after a change only the
files that changed are tokenized again; the postings are then merged anew (a few hundred ms on
Django).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from codewhere.tokens import index_tokens
from codewhere.types import ChunkRow

K1 = 1.2
B = 0.75


def fold(token: str) -> str:
    """A token as FTS5's unicode61 tokenizer (remove_diacritics 2) stores it: lower case, and
    Latin letters without their accents (its table covers Latin scripts only)."""
    if token.isascii():
        return token.lower()
    return "".join(_plain(c) for c in token).lower()


def _plain(c: str) -> str:
    if ord(c) < 0x250 or 0x1E00 <= ord(c) <= 0x1EFF:
        return "".join(d for d in unicodedata.normalize("NFKD", c) if not unicodedata.combining(d))
    return c


def _tokens(text: str) -> list[str]:
    tokens = index_tokens(text)
    if tokens.isascii():  # nearly always: the tokens are lower case already
        return tokens.split()
    return [fold(t) for t in tokens.split()]


@dataclass(frozen=True)
class FileTokens:
    """One file's chunks as postings: for each (chunk, term), the term's count in the path and in
    the text; and each chunk's length in tokens."""

    chunk_ids: np.ndarray  # int64, one per chunk
    lengths: np.ndarray  # int32, tokens of path and text, one per chunk
    posting_chunk: np.ndarray  # int32: index into chunk_ids
    posting_term: np.ndarray  # int32
    in_path: np.ndarray  # float32
    in_text: np.ndarray  # float32


class Vocabulary:
    """Term → id, shared by every build (it only grows: ids stay valid for cached files)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def ids_of(self, tokens: Iterable[str]) -> list[int]:
        ids = self.ids
        return [ids.setdefault(t, len(ids)) for t in tokens]


def file_tokens(rows: Sequence[ChunkRow], vocabulary: Vocabulary) -> FileTokens:
    chunk_ids, lengths, chunks, terms, columns = [], [], [], [], []
    for n, row in enumerate(rows):
        path = _tokens(row.path)
        text = _tokens(row.text)
        chunk_ids.append(row.chunk_id)
        lengths.append(len(path) + len(text))
        ids = vocabulary.ids_of(path + text)
        terms += ids
        chunks += [n] * len(ids)
        columns += [0] * len(path) + [1] * len(text)
    if not terms:
        empty = np.empty(0, np.int32)
        return FileTokens(np.asarray(chunk_ids, np.int64), np.asarray(lengths, np.int32), empty, empty,
                          np.empty(0, np.float32), np.empty(0, np.float32))
    key = np.asarray(chunks, np.int64) << 32 | np.asarray(terms, np.int64)
    column = np.asarray(columns, np.int8)
    order = np.argsort(key, kind="stable")
    key, column = key[order], column[order]
    unique, start = np.unique(key, return_index=True)
    in_text = np.add.reduceat(column.astype(np.float32), start)
    counts = np.diff(np.append(start, len(key))).astype(np.float32)
    return FileTokens(np.asarray(chunk_ids, np.int64), np.asarray(lengths, np.int32), (unique >> 32).astype(np.int32),
                      (unique & 0xFFFFFFFF).astype(np.int32), counts - in_text, in_text)


class WarmKeywords:
    """The postings of every chunk, by term: what `search` reads."""

    def __init__(self, files: Mapping[int, tuple[object, FileTokens]], vocabulary: Vocabulary) -> None:
        self.files = dict(files)  # file id → (its content hash, tokens): reused by the next build
        self.vocabulary = vocabulary
        parts = list(self.files.values())
        self.chunk_ids = np.concatenate([t.chunk_ids for _, t in parts]) if parts else np.empty(0, np.int64)
        self.lengths = np.concatenate([t.lengths for _, t in parts]).astype(np.float64) if parts else np.empty(0)
        offsets = np.cumsum([0] + [len(t.chunk_ids) for _, t in parts])[:-1]
        if parts:
            doc = np.concatenate([t.posting_chunk.astype(np.int64) + o for (_, t), o in zip(parts, offsets, strict=True)])
            term = np.concatenate([t.posting_term for _, t in parts])
            in_path = np.concatenate([t.in_path for _, t in parts])
            in_text = np.concatenate([t.in_text for _, t in parts])
        else:
            doc, term = np.empty(0, np.int64), np.empty(0, np.int32)
            in_path = in_text = np.empty(0, np.float32)
        order = np.argsort(term, kind="stable")
        self.doc, self.in_path, self.in_text = doc[order], in_path[order], in_text[order]
        self.starts = np.searchsorted(term[order], np.arange(len(vocabulary.ids) + 1))
        self.rows = len(self.chunk_ids)
        self.average_length = float(self.lengths.sum()) / self.rows if self.rows else 0.0

    def search(self, terms: Sequence[str], weights: tuple[float, float], limit: int) -> list[tuple[int, float]]:
        """(chunk id, score) of the best `limit` chunks holding any of the terms, best first (ties
        by chunk id); the score is FTS5's bm25 with its sign turned, as the store returns it."""
        if not self.rows or limit <= 0:
            return []
        scores = np.zeros(self.rows)
        matched = np.zeros(self.rows, bool)
        norm = K1 * (1.0 - B + B * self.lengths / self.average_length)
        for term in dict.fromkeys(fold(t) for t in terms):
            term_id = self.vocabulary.ids.get(term)
            if term_id is None or term_id + 1 >= len(self.starts):
                continue
            lo, hi = int(self.starts[term_id]), int(self.starts[term_id + 1])
            if lo == hi:
                continue
            idf = math.log((self.rows - (hi - lo) + 0.5) / ((hi - lo) + 0.5))
            idf = idf if idf > 0.0 else 1e-6
            docs = self.doc[lo:hi]
            frequency = weights[0] * self.in_path[lo:hi].astype(np.float64) + weights[1] * self.in_text[lo:hi]
            scores[docs] += idf * (frequency * (K1 + 1.0)) / (frequency + norm[docs])
            matched[docs] = True
        candidates = np.flatnonzero(matched)
        if not len(candidates):
            return []
        if len(candidates) > limit:
            # keep every chunk tied with the last one kept, so ties are broken by chunk id below
            cut = np.partition(scores[candidates], len(candidates) - limit)[len(candidates) - limit]
            candidates = candidates[scores[candidates] >= cut]
        best = sorted(((-scores[i], int(self.chunk_ids[i])) for i in candidates))[:limit]
        return [(cid, -negative) for negative, cid in best]


def build(
    files: Mapping[int, tuple[object, Sequence[ChunkRow]]], before: WarmKeywords | None = None
) -> WarmKeywords:
    """Postings for these files (id → content hash, chunk rows); files whose hash `before` already
    holds are not tokenized again."""
    vocabulary = before.vocabulary if before is not None else Vocabulary()
    held = before.files if before is not None else {}
    tokens: dict[int, tuple[object, FileTokens]] = {}
    for file_id, (digest, rows) in files.items():
        kept = held.get(file_id)
        tokens[file_id] = kept if kept is not None and kept[0] == digest else (digest, file_tokens(rows, vocabulary))
    return WarmKeywords(tokens, vocabulary)
