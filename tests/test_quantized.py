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
