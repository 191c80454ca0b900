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

import itertools
import math
import operator
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

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
    the text; and each chunk's length in tokens. Then the file as one document (the store's
    `files_fts` row: its path once and every chunk's text): each term's counts and its length."""

    chunk_ids: np.ndarray  # int64, one per chunk
    lengths: np.ndarray  # int32, tokens of path and text, one per chunk
    posting_chunk: np.ndarray  # int32: index into chunk_ids
    posting_term: np.ndarray  # int32
    in_path: np.ndarray  # float32
    in_text: np.ndarray  # float32
    key: tuple[str, str] = ("", "")  # (repository, path), as its chunk rows name them
    file_terms: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    file_in_path: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    file_in_text: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    file_length: int = 0


class Vocabulary:
    """Term → id, shared by every build (it only grows: ids stay valid for cached files)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def ids_of(self, tokens: Sequence[str]) -> list[int]:
        ids = self.ids
        found: list[int | None] = list(map(ids.get, tokens))  # in C: most tokens are known
        if None in found:
            for at in itertools.compress(range(len(found)), map(operator.is_, found, itertools.repeat(None))):
                found[at] = ids.setdefault(tokens[at], len(ids))
        return cast(list[int], found)


def file_tokens(rows: Sequence[ChunkRow], vocabulary: Vocabulary) -> FileTokens:
    return tokens_of_chunks([row.chunk_id for row in rows], [(_tokens(row.path), _tokens(row.text)) for row in rows],
                            vocabulary, (rows[0].repo, rows[0].path) if rows else ("", ""))


def written_tokens(index_text: str) -> list[str]:
    """The tokens of text `index_tokens` already made (what the indexer writes to FTS5), as FTS5 stores them."""
    if index_text.isascii():
        return index_text.split()
    return [fold(t) for t in index_text.split()]


def tokens_of_chunks(chunk_ids: Sequence[int], tokens: Sequence[tuple[list[str], list[str]]], vocabulary: Vocabulary,
                     key: tuple[str, str] = ("", "")) -> FileTokens:
    """One file's postings from each chunk's (path tokens, text tokens); every chunk has the
    file's path. Each chunk's text is counted in one pass over the file's tokens, the path once."""
    path = tokens[0][0] if tokens else []
    if any(p != path for p, _ in tokens):
        raise ValueError("the chunks of one file have one path")
    text_counts = np.fromiter(map(len, (t for _, t in tokens)), np.int64, len(tokens))
    lengths = (text_counts + len(path)).astype(np.int32)
    text_ids = np.asarray(vocabulary.ids_of(list(itertools.chain.from_iterable(t for _, t in tokens))), np.int64)
    if not len(text_ids) and not path:
        empty = np.empty(0, np.int32)
        return FileTokens(np.asarray(chunk_ids, np.int64), lengths, empty, empty,
                          np.empty(0, np.float32), np.empty(0, np.float32), key)
    text_pairs, text_n = np.unique(np.repeat(np.arange(len(tokens), dtype=np.int64), text_counts) << 32 | text_ids,
                                   return_counts=True)
    path_terms, path_n = np.unique(np.asarray(vocabulary.ids_of(path), np.int64), return_counts=True)
    path_pairs = (np.arange(len(tokens), dtype=np.int64)[:, None] << 32 | path_terms[None, :]).ravel()
    pairs, inverse = np.unique(np.concatenate([text_pairs, path_pairs]), return_inverse=True)
    in_text = np.bincount(inverse[: len(text_pairs)], weights=text_n, minlength=len(pairs)).astype(np.float32)
    in_path = np.bincount(inverse[len(text_pairs) :], weights=np.tile(path_n, len(tokens)),
                          minlength=len(pairs)).astype(np.float32)
    posting_term = (pairs & 0xFFFFFFFF).astype(np.int32)
    # the file as one document (files_fts): its path once and every chunk's text
    file_terms, by_term = np.unique(posting_term, return_inverse=True)
    file_in_text = np.bincount(by_term, weights=in_text, minlength=len(file_terms)).astype(np.float32)
    file_in_path = np.zeros(len(file_terms), np.float32)
    file_in_path[np.searchsorted(file_terms, path_terms)] = path_n
    return FileTokens(np.asarray(chunk_ids, np.int64), lengths, (pairs >> 32).astype(np.int32), posting_term, in_path,
                      in_text, key, file_terms.astype(np.int32), file_in_path, file_in_text,
                      int(text_counts.sum()) + len(path))


class WarmKeywords:
    """The postings of every chunk, and of every file as one document, by term: what `search`
    and `file_search` read."""

    def __init__(self, files: Mapping[int, tuple[object, FileTokens]], vocabulary: Vocabulary) -> None:
        self.files = dict(files)  # file id → (its content hash, tokens): reused by the next build
        self.vocabulary = vocabulary
        parts = [t for _, t in self.files.values()]
        self.chunk_ids = np.concatenate([t.chunk_ids for t in parts]) if parts else np.empty(0, np.int64)
        offsets = np.cumsum([0] + [len(t.chunk_ids) for t in parts])[:-1]
        self.chunk_postings = _Postings.by_term(
            [t.posting_chunk.astype(np.int64) + o for t, o in zip(parts, offsets, strict=True)],
            [t.posting_term for t in parts], [t.in_path for t in parts], [t.in_text for t in parts],
            [t.lengths for t in parts], len(vocabulary.ids),
        )
        documents = [t for t in parts if len(t.file_terms)]  # as the store's files_fts: files with a term
        self.file_keys = [t.key for t in documents]
        self.file_postings = _Postings.by_term(
            [np.full(len(t.file_terms), n, np.int64) for n, t in enumerate(documents)], [t.file_terms for t in documents],
            [t.file_in_path for t in documents], [t.file_in_text for t in documents],
            [np.asarray([t.file_length]) for t in documents], len(vocabulary.ids),
        )

    def search(self, terms: Sequence[str], weights: tuple[float, float], limit: int) -> list[tuple[int, float]]:
        """(chunk id, score) of the best `limit` chunks holding any of the terms, best first (ties
        by chunk id); the score is FTS5's bm25 with its sign turned, as the store returns it."""
        found = self.chunk_postings.best(self._ids(terms), weights, limit)
        ids = self.chunk_ids[[i for i, _ in found]].tolist()
        return best_first(list(zip(ids, (score for _, score in found), strict=True)), limit)

    def file_search(self, terms: Sequence[str], weights: tuple[float, float], limit: int) -> dict[tuple[str, str], float]:
        """(repository, path) → score of the best `limit` files as documents: the store's
        file_keyword_search from memory."""
        keys = self.file_keys
        return {keys[i]: score for i, score in self.file_postings.best(self._ids(terms), weights, limit)}

    def _ids(self, terms: Sequence[str]) -> list[int]:
        known = self.vocabulary.ids
        return [i for t in dict.fromkeys(fold(t) for t in terms) if (i := known.get(t)) is not None]


class _Postings:
    """Documents (chunks, or files) by term: `starts[term]` to `starts[term + 1]` index `doc`
    and the term's counts in each document's path and text; `lengths`: each document's tokens."""

    def __init__(self, starts: np.ndarray, doc: np.ndarray, in_path: np.ndarray, in_text: np.ndarray,
                 lengths: np.ndarray) -> None:
        self.starts, self.doc, self.in_path, self.in_text, self.lengths = starts, doc, in_path, in_text, lengths
        self.norm = length_norm(lengths, len(lengths))

    @classmethod
    def by_term(cls, doc: list[np.ndarray], term: list[np.ndarray], in_path: list[np.ndarray], in_text: list[np.ndarray],
                lengths: list[np.ndarray], terms: int) -> _Postings:
        """Postings given in parts (one per file), sorted by term."""
        if not term:
            return cls(np.zeros(terms + 1, np.int64), np.empty(0, np.int64), np.empty(0, np.float32),
                       np.empty(0, np.float32), np.empty(0))
        by_term = np.concatenate(term)
        order = np.argsort(by_term, kind="stable")
        return cls(np.searchsorted(by_term[order], np.arange(terms + 1)), np.concatenate(doc)[order],
                   np.concatenate(in_path)[order], np.concatenate(in_text)[order],
                   np.concatenate(lengths).astype(np.float64))

    def best(self, term_ids: Sequence[int], weights: tuple[float, float], limit: int) -> list[tuple[int, float]]:
        """(document index, bm25 score) of the best `limit` documents holding any of the terms,
        and every document tied with the last one kept; unordered."""
        held = [(self.doc[lo:hi], self.in_path[lo:hi], self.in_text[lo:hi]) for term_id in term_ids
                if term_id + 1 < len(self.starts) and (lo := int(self.starts[term_id])) < (hi := int(self.starts[term_id + 1]))]
        return best_documents(held, len(self.lengths), self.norm, weights, limit)


Postings = tuple[np.ndarray, np.ndarray, np.ndarray]  # one term's documents, its count in each one's path and text


def best_first(found: Sequence[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
    """(id, score) pairs as the store returns them: best first, ties by id, at most `limit`
    (two stable sorts on C key functions rather than one on a tuple built in Python)."""
    ordered = sorted(found, key=operator.itemgetter(0))
    ordered.sort(key=operator.itemgetter(1), reverse=True)
    return ordered[:limit]


def length_norm(lengths: np.ndarray, rows: int) -> np.ndarray:
    """FTS5's bm25 length normalisation of each document: k1 (1 - b + b * length / average)."""
    average = float(lengths[lengths > 0].sum()) / rows if rows else 1.0
    return K1 * (1.0 - B + B * lengths / average)


def best_documents(terms: Sequence[Postings], rows: int, norm: np.ndarray, weights: tuple[float, float],
                   limit: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
    """(document, bm25 score) of the best `limit` documents holding any of the terms, and every
    document tied with the last one kept; unordered. `rows`: the documents in the collection (each
    term's idf); `norm`: each document's length normalisation, indexed by document; `allowed`: the
    only documents that may be answered (a filter: it changes no score)."""
    terms = [t for t in terms if len(t[0])]
    if not rows or limit <= 0 or not terms:
        return []
    docs = np.concatenate([t[0] for t in terms]).astype(np.int64)
    counts = [len(t[0]) for t in terms]
    idf = [math.log((rows - n + 0.5) / (n + 0.5)) for n in counts]
    weights_of_terms = np.repeat(np.array([w if w > 0.0 else 1e-6 for w in idf]), counts)
    frequency = (weights[0] * np.concatenate([t[1] for t in terms]).astype(np.float64)
                 + weights[1] * np.concatenate([t[2] for t in terms]))
    # one pass over every posting of every term, summed per document in term order (as FTS5 does)
    scores = np.bincount(docs, weights=weights_of_terms * (frequency * (K1 + 1.0)) / (frequency + norm[docs]),
                         minlength=len(norm))
    matched = np.zeros(len(norm), bool)
    matched[docs] = True
    if allowed is not None:
        permitted = np.zeros(len(norm), bool)
        permitted[allowed[allowed < len(norm)]] = True
        matched &= permitted
    candidates = np.flatnonzero(matched)
    if len(candidates) > limit:
        # keep every document tied with the last one kept, so the caller breaks ties
        cut = np.partition(scores[candidates], len(candidates) - limit)[len(candidates) - limit]
        candidates = candidates[scores[candidates] >= cut]
    return list(zip(candidates.tolist(), scores[candidates].tolist(), strict=True))


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
