"""Keyword postings without positions, for an index too big to keep FTS5's (the kernel's).

FTS5 stores every token's position (the kernel: 214 M and 203 M of them in its two keyword
tables, 1.0 GB), which its bm25 never reads. Past the compact switch (store/sqlite/vectors.py) the SQLite
store moves FTS5's rows, a batch at a time, into `kept_postings`: for each term, the chunks and
the files holding it and its count in their path and in their text, as varints (`decode`). FTS5 keeps only the rows written since the last move (the
"delta"), so an edit is still one FTS5 write; a search scores both together as FTS5's bm25 would
over all of them (`warm_keywords.best_documents`), from the term's postings and each document's
length.

A document's length is kept too, in pages of `LENGTH_PAGE` ids; -1 marks an id no document
holds, or one deleted since it moved (its postings stay in the blobs and are skipped). A file's
postings are not kept apart: they are its chunks' (`per_file`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codewhere.store.warm_keywords import FileTokens, Vocabulary, tokens_of_chunks, written_tokens

LENGTH_PAGE = 65_536  # document ids per row of `kept_lengths` (256 KB of chunk lengths)


def varint_sizes(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, np.uint64)
    sizes = np.ones(len(v), np.int64)
    for k in range(1, 10):
        sizes += v >= np.uint64(1 << (7 * k))
    return sizes


def varints(values: np.ndarray) -> bytes:
    """Unsigned LEB128: seven bits a byte, low bits first, the top bit set on all but the last."""
    v = np.asarray(values, np.uint64)
    if not len(v):
        return b""
    sizes = varint_sizes(v)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    out = np.empty(int(ends[-1]), np.uint8)
    for j in range(int(sizes.max())):
        has = sizes > j
        byte = (v[has] >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = (sizes[has] > j + 1).astype(np.uint64) << np.uint64(7)
        out[starts[has] + j] = (byte | more).astype(np.uint8)
    return out.tobytes()


def from_varints(blob: bytes) -> np.ndarray:
    """The values `varints` wrote, as int64."""
    b = np.frombuffer(blob, np.uint8)
    if not len(b):
        return np.empty(0, np.int64)
    last = b < 0x80
    value_of = np.concatenate(([0], np.cumsum(last[:-1])))  # which value each byte belongs to
    starts = np.flatnonzero(np.concatenate(([True], last[:-1])))
    shift = (np.arange(len(b)) - starts[value_of]) * 7
    parts = (b & 0x7F).astype(np.int64) << shift
    return np.add.reduceat(parts, starts)


def decode(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(documents, count in the path, count in the text) of a term's blobs, one after another.

    A blob is varints: how many documents; each one's difference from the one before and its
    count in the text times two, plus one when the path holds the term too; then, for those,
    the count in the path (a path term is rare: most documents spend no byte on it)."""
    docs, in_path, in_text = [], [], []
    for blob in blobs:
        v = from_varints(blob)
        n = int(v[0]) if len(v) else 0
        pairs = v[1 : 1 + 2 * n].reshape(n, 2)
        docs.append(np.cumsum(pairs[:, 0]))
        in_text.append(pairs[:, 1] >> 1)
        path = np.zeros(n, np.int64)
        path[(pairs[:, 1] & 1) == 1] = v[1 + 2 * n :]
        in_path.append(path)
    if not docs:
        return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.float32)
    return (np.concatenate(docs), np.concatenate(in_path).astype(np.float32),
            np.concatenate(in_text).astype(np.float32))


SLICE_POSTINGS = 250_000  # postings encoded at a time: bounds a move's memory (~45 MB)


def encode_by_term(term: np.ndarray, docs: np.ndarray, in_path: np.ndarray, in_text: np.ndarray
                   ) -> tuple[np.ndarray, list[bytes]]:
    """Many terms' postings at once, one (term, document) pair a row: each distinct term, in
    order, and its blob (as `decode` reads it), a slice of terms at a time rather than a call per term."""
    if not len(term):
        return np.empty(0, np.int64), []
    d = np.asarray(docs, np.int64)
    t = np.asarray(term, np.int64)
    order = np.argsort(t << 32 | d) if d.max() < 1 << 32 and t.max() < 1 << 31 else np.lexsort((d, t))
    t = t[order]
    starts = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1])))
    bounds = np.append(starts, len(t))
    terms: list[np.ndarray] = []
    blobs: list[bytes] = []
    first_term = 0
    while first_term < len(starts):
        last_term = max(first_term + 1, int(np.searchsorted(bounds, bounds[first_term] + SLICE_POSTINGS, "right")) - 1)
        last_term = min(last_term, len(starts))
        lo, hi = int(bounds[first_term]), int(bounds[last_term])
        rows = order[lo:hi]
        terms.append(t[bounds[first_term:last_term]])
        blobs += _encode_slice(bounds[first_term : last_term + 1] - lo, d[rows], np.asarray(in_path, np.int64)[rows],
                               np.asarray(in_text, np.int64)[rows])
        first_term = last_term
    return np.concatenate(terms), blobs


def _encode_slice(bounds: np.ndarray, d: np.ndarray, in_path: np.ndarray, in_text: np.ndarray) -> list[bytes]:
    """The blobs of consecutive terms whose postings (sorted by document) start at `bounds`."""
    n = np.diff(bounds)
    k = len(n)
    term_of = np.repeat(np.arange(k), n)
    local = np.arange(len(d)) - bounds[:-1][term_of]
    has_path = in_path > 0
    paths = np.bincount(term_of[has_path], minlength=k)
    seg_len = 1 + 2 * n + paths
    seg_start = np.concatenate(([0], np.cumsum(seg_len)[:-1]))
    flat = np.empty(int(seg_len.sum()), np.int64)
    flat[seg_start] = n
    delta = np.diff(d, prepend=0)
    delta[bounds[:-1]] = d[bounds[:-1]]  # each term's first document as it is: its blob stands alone
    at = seg_start[term_of] + 1 + 2 * local
    flat[at] = delta
    flat[at + 1] = in_text * 2 + has_path
    taken: np.ndarray = np.cumsum(has_path) - has_path  # path counts before each posting, over the slice
    before_term = np.concatenate(([0], np.cumsum(paths)[:-1]))
    rank = taken - before_term[term_of]
    flat[(seg_start + 1 + 2 * n)[term_of[has_path]] + rank[has_path]] = in_path[has_path]
    blob = varints(flat)
    sizes = np.cumsum(varint_sizes(flat))
    ends = sizes[seg_start + seg_len - 1].tolist()
    return [blob[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]


def from_hex_rows(hexes: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(documents, count in the path, count in the text) from `%08x%08x%08x` triples, one string a
    term (what the store's SQL formats), all terms one after another."""
    values = np.frombuffer(bytes.fromhex("".join(hexes)), ">u4").reshape(-1, 3).astype(np.int64)
    return values[:, 0], values[:, 1], values[:, 2]


@dataclass
class Moving:
    """What a move writes: the chunks' postings, one (term, chunk) pair a row; each chunk's
    length; each file's length, by its first chunk id. A file's postings are its chunks'
    (`per_file`): files_fts's rows need not be kept apart."""

    term: np.ndarray
    docs: np.ndarray
    in_path: np.ndarray
    in_text: np.ndarray
    chunks: np.ndarray
    chunk_lengths: np.ndarray
    files: np.ndarray
    file_lengths: np.ndarray


def per_file(docs: np.ndarray, in_path: np.ndarray, in_text: np.ndarray, file_docs: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A term's chunk postings as its files' (each by its first chunk id; `file_docs`, sorted:
    every file moved, gone ones too), as files_fts holds them: a file's text is all its chunks'
    texts (the counts add up), its path the chunks' one. A file's chunk ids are one run from its
    first (the store gives them so), so a chunk's file is the last first id not past it."""
    at = np.searchsorted(file_docs, docs, "right") - 1
    files, inverse = np.unique(file_docs[np.maximum(at, 0)], return_inverse=True)
    text = np.bincount(inverse, weights=in_text, minlength=len(files)).astype(np.float32)
    path = np.zeros(len(files), np.float32)
    np.maximum.at(path, inverse, in_path)
    return files, path, text


class Pending:
    """The keyword rows written to FTS5 since the last move, kept as arrays by the process that
    wrote them, so the next move encodes them without reading FTS5 back (a GROUP BY over every
    token position: minutes on the kernel). Files by their first chunk id: a file written again
    before the move replaces its entry."""

    def __init__(self) -> None:
        self.vocabulary = Vocabulary()
        self.files: dict[int, FileTokens] = {}

    def add(self, chunk_ids: Sequence[int], rows: Sequence[tuple[str, str]]) -> None:
        if chunk_ids:
            tokens = [(written_tokens(path), written_tokens(body)) for path, body in rows]
            self.files[chunk_ids[0]] = tokens_of_chunks(chunk_ids, tokens, self.vocabulary)

    def drop(self, first_chunk_id: int) -> None:
        self.files.pop(first_chunk_id, None)

    def moving(self) -> Moving:
        parts = [p for p in self.files.values() if len(p.chunk_ids)]

        def joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(0, dtype)

        return Moving(
            joined([p.posting_term for p in parts], np.int64),
            joined([p.chunk_ids[p.posting_chunk] for p in parts], np.int64),
            joined([p.in_path for p in parts], np.float32),
            joined([p.in_text for p in parts], np.float32),
            joined([p.chunk_ids for p in parts], np.int64),
            joined([p.lengths for p in parts], np.int64),
            np.asarray([p.chunk_ids[0] for p in parts], np.int64),
            np.asarray([p.file_length for p in parts], np.int64),
        )

    def term_names(self) -> list[str]:
        return list(self.vocabulary.ids)


def dense_page(blob: bytes | None) -> np.ndarray:
    """A page of chunk lengths, one int32 an id (-1: none); raw, so a search reads it as it is."""
    if blob is None:
        return np.full(LENGTH_PAGE, -1, np.int32)
    return np.frombuffer(blob, np.int32).copy()


def sparse_page(blob: bytes | None) -> tuple[np.ndarray, np.ndarray]:
    """A page of file lengths: (first chunk ids, lengths), by id; a file's chunks are the ids from
    its first up to the next file's (`per_file`)."""
    if blob is None:
        return np.empty(0, np.int64), np.empty(0, np.int32)
    n = len(blob) // 12
    return np.frombuffer(blob[: 8 * n], np.int64).copy(), np.frombuffer(blob[8 * n :], np.int32).copy()


def sparse_blob(docs: np.ndarray, lengths: np.ndarray) -> bytes:
    return np.asarray(docs, np.int64).tobytes() + np.asarray(lengths, np.int32).tobytes()


def merged(docs: np.ndarray, lengths: np.ndarray, new_docs: np.ndarray, new_lengths: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse lengths with new ones set (the newer of two for one id), by id."""
    all_docs = np.concatenate([docs, new_docs])
    all_lengths = np.concatenate([lengths, np.asarray(new_lengths, np.int32)])
    order = np.argsort(all_docs, kind="stable")
    all_docs, all_lengths = all_docs[order], all_lengths[order]
    last = np.append(all_docs[1:] != all_docs[:-1], True)
    return all_docs[last], all_lengths[last]


def live(docs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which of the documents are still held (moved, and not deleted since)."""
    inside = docs < len(lengths)
    keep = np.zeros(len(docs), bool)
    keep[inside] = lengths[docs[inside]] >= 0
    return keep
