"""Reciprocal Rank Fusion: ranks, never scores — BM25 and cosine live on different scales."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from codewhere.search.params import DEFAULT_PARAMS


def rrf(
    rankings: Mapping[str, Sequence[int]],
    k: int = DEFAULT_PARAMS.rrf_k,
    depth: int = DEFAULT_PARAMS.rrf_depth,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse named rankings into (id, score, {retriever: 1-based rank}) sorted by score.

    Each list adds weight / (k + rank) (weight 1 unless given). Ties keep the order of first
    appearance across the rankings in the order given, so the result is deterministic.
    """
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, ids in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, item in enumerate(ids[:depth], start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            ranks.setdefault(item, {})[name] = rank
    order = {item: i for i, item in enumerate(scores)}
    fused = sorted(scores, key=lambda item: (-scores[item], order[item]))
    return [(item, scores[item], ranks[item]) for item in fused]
