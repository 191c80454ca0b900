from __future__ import annotations

import numpy as np
import pytest

from codewhere.store import quantized
from codewhere.store.quantized import QuantizedVectors


def _exact(matrix: np.ndarray, query: np.ndarray, alive: np.ndarray, k: int) -> list[int]:
    similarity = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    similarity[~alive] = -np.inf
    return list(np.argsort(-similarity, kind="stable")[:k])


@pytest.mark.parametrize("dim", [256, 100])  # 100: the last bit word is padded
def test_the_shortlist_then_the_byte_codes_find_most_of_the_exact_nearest(dim: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    centers = rng.normal(size=(40, dim))
    matrix = (centers[rng.integers(0, 40, 20_000)] + 0.6 * rng.normal(size=(20_000, dim))).astype(np.float32)
    alive = rng.random(20_000) > 0.1
    monkeypatch.setattr(quantized, "SHORTLIST_MIN", 1_000)  # a shortlist of 5 % of the rows: the bits must choose well
    held = QuantizedVectors.of(matrix)
    found = []
    for q in range(20):
        query = (centers[q % 40] + 0.6 * rng.normal(size=dim)).astype(np.float32)
        rows, distances = held.nearest(query, 20, alive)
        assert alive[rows].all() and len(rows) == 20 and np.all(np.diff(distances) >= 0)
        truth = 1 - matrix[rows] @ query / (np.linalg.norm(matrix[rows], axis=1) * np.linalg.norm(query))
        assert np.abs(truth - distances).max() < 0.01  # the byte codes' cosine is close to the float one
        found.append(len(set(rows.tolist()) & set(_exact(matrix, query, alive, 20))) / 20)
    assert np.mean(found) >= 0.9


def test_dead_rows_and_zero_vectors_are_never_answers() -> None:
    matrix = np.array([[1, 0, 0], [0, 0, 0], [0.9, 0.1, 0], [0, 1, 0]], np.float32)
    held = QuantizedVectors.of(matrix)
    rows, _ = held.nearest(np.array([1, 0, 0], np.float32), 4, np.array([False, True, True, True]))
    assert rows.tolist()[:2] == [2, 3] and 0 not in rows.tolist()
    kept = held.select(np.array([True, False, True, True]))
    assert len(kept) == 3 and QuantizedVectors.joined([kept, held.select(np.array([False, False, False, True]))]).codes.shape == (4, 3)


def _shortlist_by_histogram(words: np.ndarray, query_words: np.ndarray, size: int, alive: np.ndarray) -> np.ndarray:
    """The shortlist as first written: whole-row passes and a histogram of the distances."""
    hamming = np.zeros(words.shape[1], np.uint16)
    for row, q in zip(words, query_words, strict=True):
        hamming += np.bitwise_count(np.bitwise_xor(row, q)).astype(np.uint16)
    dead = np.uint16(len(words) * 64 + 1)
    hamming[~alive] = dead
    counts = np.cumsum(np.bincount(hamming, minlength=int(dead) + 1))
    threshold = int(np.searchsorted(counts, min(size, int(alive.sum()))))
    return np.flatnonzero(hamming <= min(threshold, int(dead) - 1))


@pytest.mark.parametrize("stored_by_row", [False, True])  # True: the store's pages, read as a transposed view
def test_the_blocked_shortlist_keeps_the_rows_of_the_histogram(stored_by_row: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantized, "HAMMING_BLOCK", 1_000)  # several blocks and a short last one
    rng = np.random.default_rng(3)
    signs = quantized.sign_bytes(rng.normal(size=(5_321, 256)).astype(np.float32))
    words = signs.view(np.uint64).T if stored_by_row else quantized.sign_words(signs)
    for trial in range(12):
        query = quantized.sign_words(quantized.sign_bytes(rng.normal(size=(1, 256)).astype(np.float32)))[:, 0]
        exact = [bin(int.from_bytes(np.bitwise_xor(words[:, i], query).tobytes(), "little")).count("1") for i in range(5_321)]
        assert quantized.hamming_distances(words, query).tolist() == exact
        alive = rng.random(5_321) > (0.0 if trial % 3 == 0 else 0.3)
        for size in (1, 37, 2_000, 5_321, 9_999):
            got = quantized.shortlist(words, query, size, alive)
            assert np.array_equal(got, _shortlist_by_histogram(words, query, size, alive)), (trial, size)
            assert alive[got].all() and len(got) >= min(size, int(alive.sum()))
    assert len(quantized.shortlist(words, query, 10, np.zeros(5_321, bool))) == 0


def test_no_vectors_have_no_distances() -> None:
    assert len(quantized.hamming_distances(np.empty((4, 0), np.uint64), np.zeros(4, np.uint64))) == 0
