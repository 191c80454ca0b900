"""Vectors past what a float32 matrix should hold in memory (the Linux kernel: 1.37 M vectors,
1.4 GB): one sign bit per dimension for a Hamming shortlist, and one byte per dimension with the
vector's scale to order the shortlist by cosine. A 256-dimension vector takes 296 bytes instead
of 1,024; a search reads its 32 bytes of bits, then the bytes of a few thousand vectors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# vectors: past this many an index holds them quantized, its chunk texts cut from the files and its
# keyword postings without positions (the compact form, store/sqlite/vectors.py). Django 5.1.4 (48k vectors,
# benchmarks/index_size.py): 172 MB -> 77 MB (5.0x -> 2.3x the text it read), one-shot search p50
# 33 -> 19 ms, warm 6.1 -> 3.8-5.1 ms; its first build 20-22 -> 25-27 s (`codewhere index`, one run:
# 63-65 -> 70 s, peak 338 -> 524 MB: the switch rewrites what the first 20k wrote). Dev split with
# every index compact: NDCG@10 0.8862 -> 0.8858.
QUANTIZE_FROM = 20_000
SHORTLIST_MIN = 2_000  # on the kernel, exact top 100 kept: 0.79 of it at 500, 0.89 at 1000, 0.95 at 2000
SHORTLIST_PER_RESULT = 20
HAMMING_BLOCK = 32_768  # vectors whose sign words are compared at a time: 256 KB of one word, 1 MB of four


def sign_bytes(matrix: np.ndarray) -> np.ndarray:
    """(n, bytes) uint8: bit i of a vector set when dimension i is positive, padded to whole
    64-bit words (a 256-dimension vector: 32 bytes). What an index stores."""
    packed = np.packbits(np.asarray(matrix) > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    return np.pad(packed, ((0, 0), (0, pad))) if pad else packed


def sign_words(signs: np.ndarray) -> np.ndarray:
    """(words, n) uint64 of `sign_bytes`: each 64-dimension word of every vector contiguous,
    so a search makes one pass per word."""
    return np.ascontiguousarray(np.ascontiguousarray(signs).view(np.uint64).T)


def _sign_words(matrix: np.ndarray) -> np.ndarray:
    return sign_words(sign_bytes(matrix))


def byte_codes(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, scales, norms): one signed byte per dimension with the vector's scale (a vector
    is about codes * scale), and the norm of the vector as given."""
    matrix = np.asarray(matrix, np.float32)
    peak = np.abs(matrix).max(axis=1) if len(matrix) else np.empty(0, np.float32)
    scales = (peak / 127).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = np.nan_to_num(np.rint(matrix / scales[:, None])).astype(np.int8)
    return codes, scales, np.linalg.norm(matrix, axis=1).astype(np.float32)


def code_distances(codes: np.ndarray, scales: np.ndarray, norms: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine distances of the coded vectors to `query` (2.0 where a vector is all zeros)."""
    q = np.asarray(query, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        similarity = (codes.astype(np.float32) @ q) * scales / (norms * np.float32(np.linalg.norm(q)))
    return np.nan_to_num(np.float32(1.0) - similarity, nan=2.0)


def hamming_distances(words: np.ndarray, query_words: np.ndarray) -> np.ndarray:
    """(n,) uint16: how many sign bits of each vector differ from the query's. Made a block of
    vectors at a time, so each block's words stay in the cache between the XOR, the bit count
    and the sum (1.44 M random vectors, the kernel's count: 20 -> 14.5 ms against whole-row passes)."""
    n = words.shape[1]
    hamming = np.empty(n, np.uint16)
    block = max(1, min(n, HAMMING_BLOCK))
    word = np.empty(block, np.uint64)
    count = np.empty(block, np.uint8)
    for start in range(0, n, block):
        end = min(n, start + block)
        into, xored, bits = hamming[start:end], word[:end - start], count[:end - start]
        for i, (row, q) in enumerate(zip(words, query_words, strict=True)):
            np.bitwise_xor(row[start:end], q, out=xored)
            np.bitwise_count(xored, out=bits)
            if i:
                np.add(into, bits, out=into)
            else:
                np.copyto(into, bits)
    return hamming


def shortlist(words: np.ndarray, query_words: np.ndarray, size: int, alive: np.ndarray) -> np.ndarray:
    """The live rows whose Hamming distance to the query is at most that of the `size`-th
    nearest (ties included), in row order."""
    live = int(alive.sum())
    if not live or not size:
        return np.empty(0, np.intp)
    hamming = hamming_distances(words, query_words)
    dead = np.uint16(len(words) * 64 + 1)
    hamming[~alive] = dead
    nth = min(size, live) - 1  # a partition finds the size-th distance (a histogram took 4x longer)
    return np.flatnonzero(hamming <= np.partition(hamming, nth)[nth])


def shortlist_size(k: int) -> int:
    return max(SHORTLIST_MIN, SHORTLIST_PER_RESULT * k)


def by_codes(keys: np.ndarray, codes: np.ndarray, scales: np.ndarray, norms: np.ndarray, query: np.ndarray,
             k: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, cosine distances) of the `k` nearest of a shortlist by its byte codes, nearest
    first (ties by key)."""
    distance = code_distances(codes, scales, norms, query)
    order = np.lexsort((keys, distance))[:k]
    return keys[order], distance[order]


@dataclass(frozen=True)
class QuantizedVectors:
    words: np.ndarray  # (words, n) uint64 sign bits
    codes: np.ndarray  # (n, dim) int8: a vector is about codes * scale
    scales: np.ndarray  # (n,) float32
    norms: np.ndarray  # (n,) float32: the norms of the vectors as stored

    @classmethod
    def of(cls, matrix: np.ndarray) -> QuantizedVectors:
        codes, scales, norms = byte_codes(matrix)
        return cls(_sign_words(matrix), codes, scales, norms)

    def __len__(self) -> int:
        return len(self.scales)

    @classmethod
    def joined(cls, parts: list[QuantizedVectors]) -> QuantizedVectors:
        """The parts' vectors, in order, copied once."""
        parts = [p for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.of(np.empty((0, 0), np.float32))
        return cls(np.concatenate([p.words for p in parts], axis=1), np.concatenate([p.codes for p in parts]),
                   np.concatenate([p.scales for p in parts]), np.concatenate([p.norms for p in parts]))

    def select(self, keep: np.ndarray) -> QuantizedVectors:
        return QuantizedVectors(np.ascontiguousarray(self.words[:, keep]), self.codes[keep], self.scales[keep], self.norms[keep])

    def nearest(self, query: np.ndarray, k: int, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cosine distances) of about the `k` nearest live vectors, nearest first: the
        shortlist of the smallest Hamming distances, ordered by the byte codes."""
        rows = shortlist(self.words, _sign_words(np.asarray(query, np.float32)[None, :])[:, 0], shortlist_size(k), alive)
        return by_codes(rows, self.codes[rows], self.scales[rows], self.norms[rows], query, k)
