"""Keyword postings without positions, for an index too big to keep FTS5's (the kernel's).

FTS5 stores every token's position (the kernel: 214 M and 203 M of them in its two keyword
tables, 1.0 GB), which its bm25 never reads. Past the compact switch (store/sqlite.py) the SQLite
store moves FTS5's rows, a batch at a time, into `kept_postings`: for each term, the documents
holding it and its count in their path and in their text, as varints (the document as the
difference from the one before). FTS5 keeps only the rows written since the last move (the
"delta"), so an edit is still one FTS5 write; a search scores both together as FTS5's bm25 would
over all of them (`warm_keywords.best_documents`), from the term's postings and each document's
length.

A document's length is kept too, in pages of `LENGTH_PAGE` ids; -1 marks an id no document
holds, or one deleted since it moved (its postings stay in the blobs and are skipped).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codewhere.store.warm_keywords import FileTokens, Vocabulary, tokens_of_chunks, written_tokens

LENGTH_PAGE = 65_536  # document ids per row of `kept_lengths` (256 KB of int32 before zlib)
VALUES = 3  # varints a posting: document difference, count in the path, count in the text


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


def encode(docs: np.ndarray, in_path: np.ndarray, in_text: np.ndarray) -> bytes:
    """One term's postings as a blob; documents in any order, each once."""
    order = np.argsort(docs, kind="stable")
    d = np.asarray(docs, np.int64)[order]
    values = np.empty((len(d), VALUES), np.int64)
    values[:, 0] = np.diff(d, prepend=0)
    values[:, 1] = np.asarray(in_path, np.int64)[order]
    values[:, 2] = np.asarray(in_text, np.int64)[order]
    return varints(values.ravel())


def decode(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(documents, count in the path, count in the text) of a term's blobs, one after another."""
    if not blobs:
        return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.float32)
    parts = [from_varints(b).reshape(-1, VALUES) for b in blobs]
    docs = np.concatenate([np.cumsum(p[:, 0]) for p in parts])
    values = np.concatenate(parts)
    return docs, values[:, 1].astype(np.float32), values[:, 2].astype(np.float32)


def encode_by_term(term: np.ndarray, docs: np.ndarray, in_path: np.ndarray, in_text: np.ndarray
                   ) -> tuple[np.ndarray, list[bytes]]:
    """Many terms' postings at once, one (term, document) pair a row: each distinct term and its
    blob (as `encode` writes it), in one pass over every posting rather than a call per term."""
    if not len(term):
        return np.empty(0, np.int64), []
    d = np.asarray(docs, np.int64)
    t = np.asarray(term, np.int64)
    if d.max() < 1 << 32 and t.max() < 1 << 31:  # one int64 key sorts faster than two
        order = np.argsort(t << 32 | d)
    else:
        order = np.lexsort((d, t))
    term, d = t[order], d[order]
    firsts = np.flatnonzero(np.concatenate(([True], term[1:] != term[:-1])))
    values = np.empty((len(d), VALUES), np.int64)
    values[:, 0] = np.diff(d, prepend=0)
    values[firsts, 0] = d[firsts]  # each term's first document as it is: its blob stands alone
    values[:, 1] = np.asarray(in_path, np.int64)[order]
    values[:, 2] = np.asarray(in_text, np.int64)[order]
    flat = values.ravel()
    blob = varints(flat)
    posting_end = np.cumsum(varint_sizes(flat).reshape(-1, VALUES).sum(axis=1))
    cuts = np.concatenate(([0], posting_end[firsts[1:] - 1], [posting_end[-1]])).tolist()
    return term[firsts], [blob[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def from_hex_rows(hexes: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(documents, count in the path, count in the text) from `%08x%08x%08x` triples, one string a
    term (what the store's SQL formats), all terms one after another."""
    values = np.frombuffer(bytes.fromhex("".join(hexes)), ">u4").reshape(-1, VALUES).astype(np.int64)
    return values[:, 0], values[:, 1], values[:, 2]


@dataclass
class Batch:
    """Postings of documents of one table, one (term, document) pair a row, and each document's length."""

    term: np.ndarray
    docs: np.ndarray
    in_path: np.ndarray
    in_text: np.ndarray
    lengths_of: np.ndarray  # documents
    lengths: np.ndarray


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

    def batches(self) -> tuple[Batch, Batch]:
        """(chunks, files) as the FTS5 tables hold them."""
        parts = list(self.files.values())
        chunks = Batch(
            np.concatenate([p.posting_term for p in parts] or [np.empty(0, np.int32)]),
            np.concatenate([p.chunk_ids[p.posting_chunk] for p in parts] or [np.empty(0, np.int64)]),
            np.concatenate([p.in_path for p in parts] or [np.empty(0)]),
            np.concatenate([p.in_text for p in parts] or [np.empty(0)]),
            np.concatenate([p.chunk_ids for p in parts] or [np.empty(0, np.int64)]),
            np.concatenate([p.lengths for p in parts] or [np.empty(0, np.int32)]),
        )
        documents = [p for p in parts if len(p.chunk_ids)]
        files = Batch(
            np.concatenate([p.file_terms for p in documents] or [np.empty(0, np.int32)]),
            np.concatenate([np.full(len(p.file_terms), p.chunk_ids[0]) for p in documents] or [np.empty(0, np.int64)]),
            np.concatenate([p.file_in_path for p in documents] or [np.empty(0)]),
            np.concatenate([p.file_in_text for p in documents] or [np.empty(0)]),
            np.asarray([p.chunk_ids[0] for p in documents], np.int64),
            np.asarray([p.file_length for p in documents], np.int64),
        )
        return chunks, files

    def term_names(self) -> list[str]:
        return list(self.vocabulary.ids)


def length_page(lengths: np.ndarray) -> bytes:
    return zlib.compress(np.asarray(lengths, np.int32).tobytes(), 1)


def page_lengths(blob: bytes | None) -> np.ndarray:
    """A page's lengths (a new page: every id free)."""
    if blob is None:
        return np.full(LENGTH_PAGE, -1, np.int32)
    return np.frombuffer(zlib.decompress(blob), np.int32).copy()


def live(docs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which of the documents are still held (moved, and not deleted since)."""
    inside = docs < len(lengths)
    keep = np.zeros(len(docs), bool)
    keep[inside] = lengths[docs[inside]] >= 0
    return keep
